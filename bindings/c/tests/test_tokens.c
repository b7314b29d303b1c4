/*
 * Token estimation through the C API: every document of the committed held-out sample
 * (tests/tokens/sample, with exact counts from real tokenizers in expected.json) must be
 * estimated within the core's bounds; the streaming estimator fed any document in pieces of any
 * size gives exactly the whole document's estimate; request estimates add up and match the table
 * every language shares (tests/tokens/requests/expected.tsv); bad inputs return
 * the right statuses.
 *
 * Usage: test_tokens REPO_ROOT
 */
#include <stdint.h>

#include "check.h"

/* The core's accuracy floor per document (core/tests/tokens_accuracy.rs); the ceiling is each
 * document's `max_ratio` in the sample. */
#define FLOOR 0.80

/* The unsigned number after `"key": ` at or after `from` (and before `limit`), or -1. */
static long long number_after(const char *from, const char *limit, const char *key) {
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\": ", key);
    const char *at = strstr(from, needle);
    if (at == NULL || (limit != NULL && at > limit)) {
        return -1;
    }
    return strtoll(at + strlen(needle), NULL, 10);
}

/* The decimal number after `"key": ` at or after `from` (and before `limit`), or -1. */
static double decimal_after(const char *from, const char *limit, const char *key) {
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\": ", key);
    const char *at = strstr(from, needle);
    if (at == NULL || (limit != NULL && at > limit)) {
        return -1;
    }
    return strtod(at + strlen(needle), NULL);
}

static uint64_t estimate(const char *text, size_t len, const char *family) {
    uint64_t tokens = 0;
    CHECK_OK(fl_tokens_estimate_text(text, len, family, strlen(family), &tokens));
    return tokens;
}

/* One document of the committed sample: its name, its entry in expected.json (up to `next`,
 * the following entry or NULL) and its text. */
typedef struct {
    const char *name;
    const char *entry;
    const char *next;
    const char *text;
    size_t len;
    int index;
} sample_document;

/* Calls `check` on every document of tests/tokens/sample (read whole); returns how many were
 * read. A document that cannot be read fails the test and is skipped. */
static int for_each_sample_document(const char *root, void (*check)(const sample_document *)) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/tokens/sample/expected.json", root);
    size_t len = 0;
    char *expected = read_file(path, &len);
    CHECK(expected != NULL);
    if (expected == NULL) {
        return 0;
    }
    int documents = 0;
    for (const char *entry = strstr(expected, "\"file\": \""); entry != NULL;) {
        const char *next = strstr(entry + 1, "\"file\": \"");
        const char *name = entry + strlen("\"file\": \"");
        const char *name_end = strchr(name, '"');
        char file[256];
        snprintf(file, sizeof file, "%.*s", (int)(name_end - name), name);
        snprintf(path, sizeof path, "%s/tests/tokens/sample/%s", root, file);
        size_t text_len = 0;
        char *text = read_file(path, &text_len);
        CHECK(text != NULL);
        if (text != NULL) {
            sample_document document = {file, entry, next, text, text_len, documents};
            check(&document);
            documents++;
        }
        free(text);
        entry = next;
    }
    free(expected);
    return documents;
}

/* Every family's estimate of a document is within the accuracy floor and ceiling of its exact
 * count; the default family is "claude", also chosen by an empty name or NULL. */
static void check_sample_document(const sample_document *doc) {
    const char *families[] = {"o200k", "cl100k", "claude-legacy"};
    CHECK((long long)doc->len == number_after(doc->entry, doc->next, "bytes"));
    double ceiling = decimal_after(doc->entry, doc->next, "max_ratio");
    CHECK(ceiling >= 1.0);
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        long long exact = number_after(doc->entry, doc->next, families[f]);
        CHECK(exact > 0);
        double ratio = (double)estimate(doc->text, doc->len, families[f]) / (double)exact;
        bool within = ratio >= FLOOR && ratio <= ceiling;
        CHECK(within);
        if (!within) {
            fprintf(stderr, "    %s %s: ratio %.3f\n", families[f], doc->name, ratio);
        }
    }
    uint64_t by_name = estimate(doc->text, doc->len, "claude");
    uint64_t by_default = 0;
    CHECK_OK(fl_tokens_estimate_text(doc->text, doc->len, NULL, 0, &by_default));
    CHECK(by_name == by_default && by_name > 0);
}

static void check_sample(const char *root) {
    CHECK(for_each_sample_document(root, check_sample_document) >= 50);
}

static const char *all_families[] = {"claude", "claude-legacy", "o200k", "cl100k"};
#define FAMILY_COUNT (sizeof all_families / sizeof all_families[0])

static uint64_t estimate_bytes(const char *data, size_t len, const char *family) {
    uint64_t tokens = UINT64_MAX;
    CHECK_OK(fl_tokens_estimate_bytes((const uint8_t *)data, len, family, strlen(family), &tokens));
    return tokens;
}

/* Feeds `text` to a new estimator in pieces: of `piece` bytes each, or (piece == 0) of 1, 2, ...,
 * 17, 1, 2, ... bytes; returns the estimate. With `check_prefixes`, the estimate read after every
 * piece (non-consuming) must be that of the bytes so far. */
static uint64_t streamed(const char *text, size_t len, const char *family, size_t piece,
                         bool check_prefixes) {
    fl_text_estimator *estimator = NULL;
    CHECK_OK(fl_text_estimator_new(family, strlen(family), &estimator));
    if (estimator == NULL) {
        return UINT64_MAX;
    }
    size_t at = 0, round = 0;
    while (at < len) {
        size_t size = piece != 0 ? piece : 1 + round++ % 17;
        if (size > len - at) {
            size = len - at;
        }
        CHECK_OK(fl_text_estimator_feed(estimator, (const uint8_t *)text + at, size));
        at += size;
        if (check_prefixes) {
            uint64_t so_far = UINT64_MAX;
            CHECK_OK(fl_text_estimator_estimate(estimator, &so_far));
            CHECK(so_far == estimate_bytes(text, at, family));
        }
    }
    uint64_t tokens = UINT64_MAX, again = 0;
    CHECK_OK(fl_text_estimator_estimate(estimator, &tokens));
    CHECK_OK(fl_text_estimator_estimate(estimator, &again));
    CHECK(tokens == again);
    fl_text_estimator_free(estimator);
    return tokens;
}

/* A document fed in pieces has the estimate of the whole: cut inside lines, inside multibyte
 * characters, one byte at a time. */
static void check_streamed_document(const sample_document *doc) {
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        uint64_t whole = estimate(doc->text, doc->len, all_families[f]);
        CHECK(whole > 0 && whole == estimate_bytes(doc->text, doc->len, all_families[f]));
        size_t pieces[] = {0, 4096, 997};
        for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
            uint64_t got = streamed(doc->text, doc->len, all_families[f], pieces[p], false);
            CHECK(got == whole);
            if (got != whole) {
                fprintf(stderr, "    %s %s pieces of %zu: %llu, whole %llu\n", doc->name,
                        all_families[f], pieces[p], (unsigned long long)got,
                        (unsigned long long)whole);
            }
        }
    }
    /* One byte at a time, for the default family. */
    CHECK(streamed(doc->text, doc->len, "claude", 1, false) ==
          estimate(doc->text, doc->len, "claude"));
    /* The estimate read between pieces is that of the bytes so far, even mid-character. */
    if (doc->index % 8 == 0) {
        size_t prefix = doc->len < 1500 ? doc->len : 1500;
        streamed(doc->text, prefix, "o200k", 0, true);
    }
}

/* Every sample document (and a provider stream fixture), fed in pieces, has the estimate of the
 * whole. */
static void check_streamed_documents(const char *root) {
    char path[1024];
    CHECK(for_each_sample_document(root, check_streamed_document) >= 50);

    snprintf(path, sizeof path, "%s/tests/fixtures/anthropic/tool_use_response.sse", root);
    size_t fixture_len = 0;
    char *fixture = read_file(path, &fixture_len);
    CHECK(fixture != NULL);
    if (fixture != NULL) {
        for (size_t f = 0; f < FAMILY_COUNT; f++) {
            uint64_t whole = estimate(fixture, fixture_len, all_families[f]);
            for (size_t piece = 1; piece <= 64; piece++) {
                CHECK(streamed(fixture, fixture_len, all_families[f], piece, false) == whole);
            }
        }
        free(fixture);
    }
}

/* The estimator at the edges: no text, empty pieces, NULL with length 0, bytes that are not
 * UTF-8, bad families and NULL arguments. */
static void check_estimator_edges(void) {
    fl_text_estimator *estimator = NULL;
    uint64_t tokens = UINT64_MAX;

    /* NULL / empty family: the default, claude. */
    CHECK_OK(fl_text_estimator_new(NULL, 0, &estimator));
    CHECK_OK(fl_text_estimator_estimate(estimator, &tokens));
    CHECK(tokens == 0);
    CHECK_OK(fl_text_estimator_feed(estimator, NULL, 0));
    CHECK_OK(fl_text_estimator_feed(estimator, (const uint8_t *)"x", 0));
    CHECK_OK(fl_text_estimator_estimate(estimator, &tokens));
    CHECK(tokens == 0);
    const char *hello = "Hello, world! こんにちは\n";
    CHECK_OK(fl_text_estimator_feed(estimator, (const uint8_t *)hello, strlen(hello)));
    CHECK_OK(fl_text_estimator_feed(estimator, NULL, 0));
    CHECK_OK(fl_text_estimator_estimate(estimator, &tokens));
    CHECK(tokens == estimate(hello, strlen(hello), "claude") && tokens > 0);
    /* A failed feed feeds nothing. */
    CHECK_STATUS(fl_text_estimator_feed(estimator, NULL, 3), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`data`") != NULL);
    CHECK_STATUS(fl_text_estimator_feed(estimator, (const uint8_t *)"abc", SIZE_MAX),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_text_estimator_feed(estimator, (const uint8_t *)"abc", (size_t)PTRDIFF_MAX + 1),
                 FL_STATUS_INVALID_ARGUMENT);
    uint64_t after = UINT64_MAX;
    CHECK_OK(fl_text_estimator_estimate(estimator, &after));
    CHECK(after == tokens);
    CHECK_STATUS(fl_text_estimator_estimate(estimator, NULL), FL_STATUS_NULL_ARGUMENT);
    fl_text_estimator_free(estimator);
    estimator = NULL;

    /* Bytes that are not UTF-8 are counted, not refused: the same as the whole bytes' estimate,
     * however they are cut (a lone continuation byte, a truncated sequence, a stray 0xFF). */
    const char bad[] = "ab\xff\xfe cd\n\xc3\n\xe4\xb8 \x80\x80\x80 \xf0\x9f\x98 end\xc3";
    size_t bad_len = sizeof bad - 1;
    CHECK_STATUS(fl_tokens_estimate_text(bad, bad_len, NULL, 0, &tokens), FL_STATUS_INVALID_UTF8);
    for (size_t f = 0; f < FAMILY_COUNT; f++) {
        uint64_t whole = estimate_bytes(bad, bad_len, all_families[f]);
        CHECK(whole > 0);
        for (size_t piece = 0; piece <= bad_len; piece++) {
            CHECK(streamed(bad, bad_len, all_families[f], piece, piece == 1) == whole);
        }
    }
    /* On UTF-8 text, the bytes estimate is the text estimate; NULL with length 0 is 0 tokens. */
    CHECK(estimate_bytes(hello, strlen(hello), "cl100k") == estimate(hello, strlen(hello), "cl100k"));
    CHECK_OK(fl_tokens_estimate_bytes(NULL, 0, NULL, 0, &tokens));
    CHECK(tokens == 0);
    CHECK_STATUS(fl_tokens_estimate_bytes(NULL, 1, NULL, 0, &tokens), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_bytes((const uint8_t *)"a", 1, "gpt2", 4, &tokens),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_bytes((const uint8_t *)"a", 1, NULL, 0, NULL),
                 FL_STATUS_NULL_ARGUMENT);

    /* Bad families: a status, a message naming the family, and *out untouched. */
    fl_text_estimator *untouched = (fl_text_estimator *)&tokens;
    estimator = untouched;
    CHECK_STATUS(fl_text_estimator_new("gpt2", 4, &estimator), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "gpt2") != NULL);
    CHECK_STATUS(fl_text_estimator_new("CLAUDE", 6, &estimator), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_text_estimator_new("claude\0", 7, &estimator), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_text_estimator_new("o200\xff", 5, &estimator), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_text_estimator_new(NULL, 5, &estimator), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_text_estimator_new("claude", SIZE_MAX, &estimator), FL_STATUS_INVALID_ARGUMENT);
    CHECK(estimator == untouched);
    CHECK_STATUS(fl_text_estimator_new("claude", 6, NULL), FL_STATUS_NULL_ARGUMENT);

    /* NULL handles. */
    CHECK_STATUS(fl_text_estimator_feed(NULL, (const uint8_t *)"a", 1), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`estimator`") != NULL);
    CHECK_STATUS(fl_text_estimator_feed(NULL, NULL, 0), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_text_estimator_estimate(NULL, &tokens), FL_STATUS_NULL_ARGUMENT);
    fl_text_estimator_free(NULL);
}

/* A line with no line feed, longer than the estimator keeps whole (1 MiB): memory stays bounded
 * and the estimate stays within a token or so per MiB of the whole text's. */
static void check_estimator_long_line(void) {
    size_t block_len = 64 * 1024 + 7;
    char *block = malloc(block_len);
    CHECK(block != NULL);
    if (block == NULL) {
        return;
    }
    const char *pattern = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkrLw";
    for (size_t i = 0; i < block_len; i++) {
        block[i] = pattern[i % strlen(pattern)];
    }
    fl_text_estimator *estimator = NULL;
    CHECK_OK(fl_text_estimator_new("cl100k", 6, &estimator));
    size_t rounds = 40;
    for (size_t i = 0; i < rounds; i++) {
        CHECK_OK(fl_text_estimator_feed(estimator, (const uint8_t *)block, block_len));
    }
    uint64_t streamed_tokens = 0;
    CHECK_OK(fl_text_estimator_estimate(estimator, &streamed_tokens));
    fl_text_estimator_free(estimator);
    char *whole = malloc(block_len * rounds);
    CHECK(whole != NULL);
    if (whole != NULL) {
        for (size_t i = 0; i < rounds; i++) {
            memcpy(whole + i * block_len, block, block_len);
        }
        uint64_t exact = estimate(whole, block_len * rounds, "cl100k");
        uint64_t cuts = block_len * rounds / (1024 * 1024);
        uint64_t diff = exact > streamed_tokens ? exact - streamed_tokens : streamed_tokens - exact;
        CHECK(diff <= 2 * cuts + 1);
        free(whole);
    }
    free(block);
}

static void check_text(void) {
    CHECK(estimate("", 0, "o200k") == 0);
    CHECK(estimate("a", 1, "o200k") >= 1);
    uint64_t hello = estimate("Hello, world!", 13, "o200k");
    CHECK(hello >= 2 && hello <= 6);
    /* CJK costs far more than chars/4 suggests. */
    const char *cjk = "日本語のテキストは英語よりも多くのトークンを使います。";
    uint64_t cjk_tokens = estimate(cjk, strlen(cjk), "cl100k");
    CHECK(cjk_tokens > strlen(cjk) / 4);
}

static void check_request(void) {
    const char *body =
        "{\"model\":\"claude-sonnet-4\",\"max_tokens\":1024,\"system\":\"You are terse.\","
        "\"tools\":[{\"name\":\"read\",\"description\":\"Read a file\","
        "\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Summarise README.md\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"read\","
        "\"input\":{\"path\":\"README.md\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
        "\"content\":\"ferroloop is the hot path of an LLM agent loop.\"}]}]}";
    fl_request_estimate parts;
    memset(&parts, 0xff, sizeof parts);
    CHECK_OK(fl_tokens_estimate_request(body, strlen(body), "claude", 6, &parts));
    CHECK(parts.total == parts.system + parts.tools + parts.messages + parts.overhead);
    CHECK(parts.system > 0 && parts.tools > 0 && parts.messages > 0);
    CHECK(parts.messages >= estimate("Summarise README.md", 19, "claude"));

    /* Without tools, the tools part is zero. */
    const char *plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    CHECK_OK(fl_tokens_estimate_request(plain, strlen(plain), NULL, 0, &parts));
    CHECK(parts.tools == 0 && parts.system == 0 && parts.messages > 0);

    /* A lone surrogate escape (JSON text of a string cut inside an emoji) counts as U+FFFD,
     * as in Python and Node; it was refused as invalid JSON. */
    const char *lone = "{\"messages\":[{\"role\":\"user\",\"content\":\"cut \\ud83d here\"}]}";
    const char *replaced =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"cut \\ufffd here\"}]}";
    fl_request_estimate with_lone, with_replacement;
    CHECK_OK(fl_tokens_estimate_request(lone, strlen(lone), NULL, 0, &with_lone));
    CHECK_OK(fl_tokens_estimate_request(replaced, strlen(replaced), NULL, 0, &with_replacement));
    CHECK(with_lone.total == with_replacement.total);
}

/* Every line of tests/tokens/requests/expected.tsv (a body, a family, the core's parts) is what
 * fl_tokens_estimate_request gives: the table the Rust, Python, Node and CLI suites check too. */
static void check_shared_request_table(const char *root) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/tokens/requests/expected.tsv", root);
    size_t len = 0;
    char *table = read_file(path, &len);
    CHECK(table != NULL);
    if (table == NULL) {
        return;
    }
    int rows = 0;
    char *line = strchr(table, '\n'); /* skip the header */
    while (line != NULL && line[1] != '\0') {
        line++;
        char file[256];
        char family[32];
        unsigned long long want[5];
        int fields = sscanf(line, "%255[^\t]\t%31[^\t]\t%llu\t%llu\t%llu\t%llu\t%llu", file, family,
                            &want[0], &want[1], &want[2], &want[3], &want[4]);
        CHECK(fields == 7);
        if (fields != 7) {
            break;
        }
        snprintf(path, sizeof path, "%s/tests/tokens/requests/%s", root, file);
        size_t body_len = 0;
        char *body = read_file(path, &body_len);
        CHECK(body != NULL);
        if (body != NULL) {
            fl_request_estimate parts;
            memset(&parts, 0xff, sizeof parts);
            CHECK_OK(fl_tokens_estimate_request(body, body_len, family, strlen(family), &parts));
            uint64_t got[5] = {parts.system, parts.tools, parts.messages, parts.overhead, parts.total};
            for (int i = 0; i < 5; i++) {
                if (got[i] != want[i]) {
                    fprintf(stderr, "%s %s: part %d is %llu, the table says %llu\n", file, family, i,
                            (unsigned long long)got[i], want[i]);
                    CHECK(got[i] == want[i]);
                }
            }
            free(body);
        }
        rows++;
        line = strchr(line, '\n');
    }
    CHECK(rows >= 20);
    free(table);
}

static void check_arguments(void) {
    uint64_t tokens = 0;
    fl_request_estimate parts;
    CHECK_STATUS(fl_tokens_estimate_text("ab\xff", 3, NULL, 0, &tokens), FL_STATUS_INVALID_UTF8);
    CHECK(strstr(last_error(), "`text`") != NULL && strstr(last_error(), "byte 2") != NULL);
    CHECK_STATUS(fl_tokens_estimate_text("ab", 2, "o200\xff", 5, &tokens), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_tokens_estimate_text("ab", 2, "gpt2", 4, &tokens), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "gpt2") != NULL);
    CHECK_STATUS(fl_tokens_estimate_text(NULL, 2, NULL, 0, &tokens), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_text("ab", 2, NULL, 0, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_OK(fl_tokens_estimate_text(NULL, 0, NULL, 0, &tokens));
    CHECK(tokens == 0);
    CHECK_STATUS(fl_tokens_estimate_request("{\"messages\":[", 13, NULL, 0, &parts),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_request("[]", 2, NULL, 0, &parts), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_request("{\"a\":\"\xc3\"}", 9, NULL, 0, &parts),
                 FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_tokens_estimate_request(NULL, 2, NULL, 0, &parts), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_request("{}", 2, NULL, 0, NULL), FL_STATUS_NULL_ARGUMENT);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : ".";
    check_sample(root);
    check_streamed_documents(root);
    check_estimator_edges();
    check_estimator_long_line();
    check_text();
    check_request();
    check_shared_request_table(root);
    check_arguments();
    return check_summary("test_tokens");
}
