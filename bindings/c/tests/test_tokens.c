/*
 * Token estimation through the C API: every document of the committed held-out sample
 * (tests/tokens/sample, with exact counts from real tokenizers in expected.json) must be
 * estimated within the core's bounds; request estimates add up; bad inputs return the right
 * statuses.
 *
 * Usage: test_tokens REPO_ROOT
 */
#include <stdint.h>

#include "check.h"

/* The core's accuracy bounds per document (core/tests/tokens_accuracy.rs). */
#define FLOOR 0.80
#define CEILING 1.60

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

static uint64_t estimate(const char *text, size_t len, const char *family) {
    uint64_t tokens = 0;
    CHECK_OK(fl_tokens_estimate_text(text, len, family, strlen(family), &tokens));
    return tokens;
}

static void check_sample(const char *root) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/tokens/sample/expected.json", root);
    size_t len = 0;
    char *expected = read_file(path, &len);
    CHECK(expected != NULL);
    if (expected == NULL) {
        return;
    }
    int documents = 0;
    const char *families[] = {"o200k", "cl100k", "claude-legacy"};
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
        CHECK(text == NULL || (long long)text_len == number_after(entry, next, "bytes"));
        for (size_t f = 0; text != NULL && f < sizeof families / sizeof families[0]; f++) {
            long long exact = number_after(entry, next, families[f]);
            CHECK(exact > 0);
            double ratio = (double)estimate(text, text_len, families[f]) / (double)exact;
            bool within = ratio >= FLOOR && ratio <= CEILING;
            CHECK(within);
            if (!within) {
                fprintf(stderr, "    %s %s: ratio %.3f\n", families[f], file, ratio);
            }
        }
        if (text != NULL) {
            /* The default family is "claude", also chosen by an empty name or NULL. */
            uint64_t by_name = estimate(text, text_len, "claude");
            uint64_t by_default = 0;
            CHECK_OK(fl_tokens_estimate_text(text, text_len, NULL, 0, &by_default));
            CHECK(by_name == by_default && by_name > 0);
        }
        free(text);
        documents++;
        entry = next;
    }
    CHECK(documents >= 50);
    free(expected);
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
    check_text();
    check_request();
    check_arguments();
    return check_summary("test_tokens");
}
