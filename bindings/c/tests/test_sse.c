/*
 * The SSE parser through the C API: every shared fixture, fed in chunks of several sizes,
 * must produce exactly the JSON lines of tests/sse/expected/ (the `ferroloop sse` format).
 *
 * Usage: test_sse REPO_ROOT
 */
#include <stdint.h>

#include "check.h"

/* Appends `text` as a JSON string, escaped like Python's json.dumps(ensure_ascii=False). */
static void append_json_string(buffer *out, const char *text, size_t len) {
    buffer_append_str(out, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        char escape[8];
        switch (c) {
        case '"': buffer_append_str(out, "\\\""); break;
        case '\\': buffer_append_str(out, "\\\\"); break;
        case '\n': buffer_append_str(out, "\\n"); break;
        case '\r': buffer_append_str(out, "\\r"); break;
        case '\t': buffer_append_str(out, "\\t"); break;
        case '\b': buffer_append_str(out, "\\b"); break;
        case '\f': buffer_append_str(out, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(escape, sizeof escape, "\\u%04x", c);
                buffer_append_str(out, escape);
            } else {
                buffer_append(out, (const char *)&text[i], 1);
            }
        }
    }
    buffer_append_str(out, "\"");
}

/* Appends `item` (an event or a retry value) to `out` as a JSON line. */
static void append_item(buffer *out, const fl_sse_item *item) {
    if (item->kind == FL_SSE_ITEM_RETRY) {
        char line[64];
        snprintf(line, sizeof line, "{\"retry\":%llu}\n", (unsigned long long)item->retry_ms);
        buffer_append_str(out, line);
        return;
    }
    CHECK(item->kind == FL_SSE_ITEM_EVENT);
    const fl_sse_event *event = &item->event;
    CHECK(event->event_type != NULL && event->data != NULL && event->id != NULL);
    buffer_append_str(out, "{\"event\":");
    append_json_string(out, event->event_type, event->event_type_len);
    buffer_append_str(out, ",\"data\":");
    append_json_string(out, event->data, event->data_len);
    buffer_append_str(out, ",\"id\":");
    append_json_string(out, event->id, event->id_len);
    buffer_append_str(out, "}\n");
}

/* Drains every completed item of `parser` into `out` as JSON lines. */
static void drain(fl_sse_parser *parser, buffer *out) {
    for (;;) {
        fl_sse_item item;
        fl_status status = fl_sse_parser_next(parser, &item);
        CHECK_OK(status);
        if (status != FL_STATUS_OK || item.kind == FL_SSE_ITEM_NONE) {
            return;
        }
        append_item(out, &item);
    }
}

/* An fl_sse_item_callback appending each item to the `buffer` behind `userdata`. */
static int append_each(void *userdata, const fl_sse_item *item) {
    CHECK(item != NULL);
    append_item((buffer *)userdata, item);
    return 0;
}

/* An fl_sse_item_callback appending one item to the `buffer` behind `userdata`, then stopping
 * the delivery (the rest stays pending). */
static int append_one(void *userdata, const fl_sse_item *item) {
    append_each(userdata, item);
    return 1;
}

/* Feeds `data[..len]` through fl_sse_parser_feed_each from a heap copy that is freed right after
 * the call: valgrind reports any view or state still pointing into it. */
static void feed_each_copy(fl_sse_parser *parser, const char *data, size_t len,
                           fl_sse_item_callback on_item, buffer *out) {
    uint8_t *copy = malloc(len == 0 ? 1 : len);
    CHECK(copy != NULL);
    if (copy == NULL) {
        return;
    }
    memcpy(copy, data, len);
    CHECK_OK(fl_sse_parser_feed_each(parser, copy, len, on_item, out));
    memset(copy, '#', len);
    free(copy);
}

/* Parses `input` fed in chunks of `chunk` bytes (0: all at once) into JSON lines. */
static void parse_in_chunks(const char *input, size_t len, size_t chunk, buffer *out) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    if (parser == NULL) {
        return;
    }
    size_t step = chunk == 0 ? (len == 0 ? 1 : len) : chunk;
    for (size_t at = 0; at < len; at += step) {
        size_t n = len - at < step ? len - at : step;
        CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input + at, n));
        drain(parser, out);
    }
    bool discarded = true;
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded); /* every fixture ends with a blank line */
    fl_sse_parser_free(parser);
}

/* How a fixture is fed: */
typedef enum {
    FEED_NEXT, /* fl_sse_parser_feed + fl_sse_parser_next after each chunk */
    FEED_EACH, /* fl_sse_parser_feed_each */
    FEED_MIXED, /* in turn: feed + next, feed_each, feed (not drained), feed_each stopping
                   after one item (the rest not drained) */
    FEED_EACH_STOP, /* fl_sse_parser_feed_each stopping after one item, then fl_sse_parser_next */
} feed_mode;

/* Parses `input` fed as the chunks ending at `ends[0..count]` (the last one is `len`) into
 * JSON lines. */
static void parse_chunks(const char *input, size_t len, const size_t *ends, size_t count,
                         feed_mode mode, buffer *out) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    if (parser == NULL) {
        return;
    }
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        size_t n = ends[i] - at;
        int turn = mode == FEED_MIXED ? (int)(i % 4) : (int)mode;
        if (turn == FEED_EACH) {
            feed_each_copy(parser, input + at, n, append_each, out);
            fl_sse_item item;
            CHECK_OK(fl_sse_parser_next(parser, &item));
            CHECK(item.kind == FL_SSE_ITEM_NONE); /* feed_each leaves nothing pending */
        } else if (turn == FEED_EACH_STOP) {
            feed_each_copy(parser, input + at, n, append_one, out);
            if (mode == FEED_EACH_STOP) {
                drain(parser, out);
            }
        } else {
            CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input + at, n));
            if (turn == FEED_NEXT) {
                drain(parser, out);
            }
        }
        at = ends[i];
    }
    CHECK(at == len);
    /* Whatever a last undrained feed left pending. */
    CHECK_OK(fl_sse_parser_feed_each(parser, NULL, 0, append_each, out));
    bool discarded = true;
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded); /* every fixture ends with a blank line */
    fl_sse_parser_free(parser);
}

/* Compares `out` with `expected`, naming the case on a difference. */
static void check_same(const buffer *out, const char *expected, size_t expected_len,
                       const char *provider, const char *name, const char *how) {
    int same = out->len == expected_len && memcmp(out->data, expected, expected_len) == 0;
    CHECK(same);
    if (!same) {
        fprintf(stderr, "    %s/%s %s: output differs\n", provider, name, how);
    }
}

/* fl_sse_parser_feed_each gives what feed + next gives: the input split in two at every
 * offset (every fifth for fixtures past 1200 bytes, to keep the valgrind run short), in small
 * random chunks, and mixed with fl_sse_parser_feed. */
static void check_fixture_feed_each(const char *input, size_t len, const char *expected,
                                    size_t expected_len, const char *provider, const char *name) {
    char how[96];
    size_t stride = len <= 1200 ? 1 : 5;
    for (size_t cut = 0; cut <= len; cut += stride) {
        size_t ends[2] = {cut, len};
        buffer out = {0};
        parse_chunks(input, len, ends, 2, FEED_EACH, &out);
        snprintf(how, sizeof how, "feed_each split at %zu", cut);
        check_same(&out, expected, expected_len, provider, name, how);
        buffer_free(&out);
    }
    size_t *ends = malloc((len + 1) * sizeof *ends);
    CHECK(ends != NULL);
    if (ends == NULL) {
        return;
    }
    uint32_t state = 0x9E3779B9u ^ (uint32_t)len;
    for (int round = 0; round < 8; round++) {
        /* Chunks of 1 to 24 bytes, then 1 to 600 bytes (past the parser's copy threshold). */
        uint32_t span = round < 4 ? 24 : 600;
        size_t count = 0;
        for (size_t at = 0; at < len;) {
            state = state * 1664525u + 1013904223u;
            size_t n = 1 + (state >> 8) % span;
            at = at + n > len ? len : at + n;
            ends[count++] = at;
        }
        for (feed_mode mode = FEED_EACH; mode <= FEED_EACH_STOP; mode++) {
            buffer out = {0};
            parse_chunks(input, len, ends, count, mode, &out);
            snprintf(how, sizeof how, "%s, random chunks round %d",
                     mode == FEED_EACH        ? "feed_each"
                     : mode == FEED_EACH_STOP ? "feed_each stopping"
                                              : "mixed feeds",
                     round);
            check_same(&out, expected, expected_len, provider, name, how);
            buffer_free(&out);
        }
    }
    free(ends);
}

static void check_fixture(const char *root, const char *provider, const char *name) {
    char input_path[1024], expected_path[1024];
    snprintf(input_path, sizeof input_path, "%s/tests/fixtures/%s/%s.sse", root, provider, name);
    snprintf(expected_path, sizeof expected_path, "%s/tests/sse/expected/%s-%s.jsonl", root,
             provider, name);
    size_t input_len = 0, expected_len = 0;
    char *input = read_file(input_path, &input_len);
    char *expected = read_file(expected_path, &expected_len);
    CHECK(input != NULL && expected != NULL);
    if (input != NULL && expected != NULL) {
        const size_t chunks[] = {0, 1, 7, 64, 4096};
        for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
            buffer out = {0};
            parse_in_chunks(input, input_len, chunks[i], &out);
            int same = out.len == expected_len && memcmp(out.data, expected, expected_len) == 0;
            CHECK(same);
            if (!same) {
                fprintf(stderr, "    %s/%s with chunks of %zu bytes: output differs\n", provider,
                        name, chunks[i]);
            }
            buffer_free(&out);
        }
        check_fixture_feed_each(input, input_len, expected, expected_len, provider, name);
    }
    free(input);
    free(expected);
}

/* Retry items, the last event id, the size limit and a discarded unterminated event. */
static void check_accessors(void) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new_with_max_event_bytes(16, &parser));
    const char *input = "\xEF\xBB\xBFretry: 1500\nid: 42\ndata: this line is far too long\n\n"
                        "event: small\ndata: ok\n\ndata: tail";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input, strlen(input)));
    fl_sse_item item;
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_RETRY && item.retry_ms == 1500);
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_EVENT);
    CHECK(text_equals(item.event.event_type, item.event.event_type_len, "small"));
    CHECK(text_equals(item.event.data, item.event.data_len, "ok"));
    CHECK(text_equals(item.event.id, item.event.id_len, "42"));
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_NONE);

    uint64_t dropped = 0, retry = 0;
    bool has_retry = false, discarded = false;
    const char *id = NULL;
    size_t id_len = 0;
    CHECK_OK(fl_sse_parser_dropped_events(parser, &dropped));
    CHECK(dropped == 1);
    CHECK_OK(fl_sse_parser_retry(parser, &retry, &has_retry));
    CHECK(has_retry && retry == 1500);
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, "42"));
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(discarded);
    fl_sse_parser_free(parser);
}

/* Invalid UTF-8 in the stream is not an error: it becomes U+FFFD (EF BF BD). */
static void check_invalid_utf8_is_replaced(void) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    const char *input = "data: a\xff\xfe" "b\n\n";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input, strlen(input)));
    fl_sse_item item;
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_EVENT);
    CHECK(text_equals(item.event.data, item.event.data_len, "a\xEF\xBF\xBD\xEF\xBF\xBD" "b"));
    fl_sse_parser_free(parser);
}

/* Counts the items delivered to it and the events among them. */
typedef struct {
    size_t items;
    size_t events;
    fl_status reentry; /* what a call on the same parser from inside the callback returned */
    fl_sse_parser *parser;
} counter;

static int count_item(void *userdata, const fl_sse_item *item) {
    counter *count = userdata;
    count->items++;
    count->events += item->kind == FL_SSE_ITEM_EVENT;
    if (count->parser != NULL) {
        fl_sse_item next;
        count->reentry = fl_sse_parser_next(count->parser, &next);
    }
    return 0;
}

/* A counting callback, pending items from fl_sse_parser_feed delivered first, a NULL
 * callback refused without feeding anything, calls on the parser from its callback refused. */
static void check_feed_each_contract(void) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    counter count = {0};
    const char *first = "retry: 10\ndata: a\n\ndata: b\n\n";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)first, strlen(first)));
    /* Two items pending from feed come before the chunk's own, in order. */
    buffer out = {0};
    const char *second = "data: c, long enough to be read in place\n\ndata: tail";
    feed_each_copy(parser, second, strlen(second), append_each, &out);
    const char *expected = "{\"retry\":10}\n"
                           "{\"event\":\"message\",\"data\":\"a\",\"id\":\"\"}\n"
                           "{\"event\":\"message\",\"data\":\"b\",\"id\":\"\"}\n"
                           "{\"event\":\"message\",\"data\":\"c, long enough to be read in "
                           "place\",\"id\":\"\"}\n";
    CHECK(out.len == strlen(expected) && memcmp(out.data, expected, out.len) == 0);
    buffer_free(&out);

    /* NULL callback: refused, nothing fed (the next chunk still continues "tail"). */
    const char *third = "s\n\ndata: d\n\n";
    CHECK_STATUS(fl_sse_parser_feed_each(parser, (const uint8_t *)"x\n\n", 3, NULL, &count),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_feed_each(NULL, (const uint8_t *)third, strlen(third), count_item,
                                         &count),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_feed_each(parser, NULL, 1, count_item, &count),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK(count.items == 0);

    /* A counting callback that also calls the parser it is fed from: refused. */
    count.parser = parser;
    count.reentry = FL_STATUS_OK;
    CHECK_OK(fl_sse_parser_feed_each(parser, (const uint8_t *)third, strlen(third), count_item,
                                     &count));
    CHECK(count.items == 2 && count.events == 2);
    CHECK(count.reentry == FL_STATUS_INVALID_STATE);
    fl_sse_item item;
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_NONE);
    bool discarded = true;
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded);
    fl_sse_parser_free(parser);
}

static int stop_after_one(void *userdata, const fl_sse_item *item) {
    (void)item;
    ++*(size_t *)userdata;
    return 1;
}

/* fl_sse_parser_finish at the end of the input discards only the unterminated tail: complete
 * items not drained yet (fed, or left by a callback that stopped) still come, before anything
 * fed after the finish. */
static void check_finish_keeps_complete_items(void) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    const char *input = "data: a\n\nretry: 5\nid: 7\ndata: b\n\ndata: tail";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input, strlen(input)));
    bool discarded = false;
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(discarded); /* "data: tail" */
    const char *id = NULL;
    size_t id_len = 0;
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, "7"));
    const char *after = "data: c\n\n";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)after, strlen(after)));
    buffer out = {0};
    drain(parser, &out);
    const char *expected = "{\"event\":\"message\",\"data\":\"a\",\"id\":\"\"}\n"
                           "{\"retry\":5}\n"
                           "{\"event\":\"message\",\"data\":\"b\",\"id\":\"7\"}\n"
                           "{\"event\":\"message\",\"data\":\"c\",\"id\":\"7\"}\n";
    CHECK(out.len == strlen(expected) && memcmp(out.data, expected, out.len) == 0);
    buffer_free(&out);

    /* A callback stopped after the first item; finish; the rest comes from feed_each, and a
     * callback that stops again leaves the others (and the new chunk) pending, in order. */
    size_t seen = 0;
    CHECK_OK(fl_sse_parser_feed_each(parser, (const uint8_t *)input, strlen(input), stop_after_one,
                                     &seen));
    CHECK(seen == 1);
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(discarded);
    CHECK_OK(fl_sse_parser_feed_each(parser, (const uint8_t *)after, strlen(after), stop_after_one,
                                     &seen));
    CHECK(seen == 2);
    CHECK_OK(fl_sse_parser_feed_each(parser, NULL, 0, append_each, &out));
    expected = "{\"event\":\"message\",\"data\":\"b\",\"id\":\"7\"}\n"
               "{\"event\":\"message\",\"data\":\"c\",\"id\":\"7\"}\n";
    CHECK(out.len == strlen(expected) && memcmp(out.data, expected, out.len) == 0);
    buffer_free(&out);

    /* Only complete items pending: nothing is discarded. */
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)after, strlen(after)));
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded);
    fl_sse_item item;
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_EVENT && text_equals(item.event.data, item.event.data_len, "c"));
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_NONE);
    /* Freed with kept items still undelivered: no leak (valgrind). */
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)after, strlen(after)));
    CHECK_OK(fl_sse_parser_finish(parser, NULL));
    fl_sse_parser_free(parser);
}

/* The last event id is the one the last blank line committed: an `id` field takes effect when
 * its event is dispatched (a blank line, also one with no data), and an unterminated event's
 * `id` is discarded with it at finish (WHATWG "last event ID buffer" / "string"). */
static void check_last_event_id_is_committed_by_blank_lines(void) {
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    const char *id = NULL;
    size_t id_len = 0;
    bool discarded = false;
    buffer out = {0};
    const char *input = "data: a\n\nid: 7\n";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)input, strlen(input)));
    drain(parser, &out);
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, "")); /* "id: 7" is only buffered */
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(discarded); /* the unterminated event "id: 7" */
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, ""));
    const char *after = "data: b\n\nid: 8\n\n";
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)after, strlen(after)));
    drain(parser, &out);
    const char *expected = "{\"event\":\"message\",\"data\":\"a\",\"id\":\"\"}\n"
                           "{\"event\":\"message\",\"data\":\"b\",\"id\":\"\"}\n";
    CHECK(out.len == strlen(expected) && memcmp(out.data, expected, out.len) == 0);
    buffer_free(&out);
    /* A blank line with no data dispatches nothing but commits the id. */
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, "8"));
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded);
    CHECK_OK(fl_sse_parser_last_event_id(parser, &id, &id_len));
    CHECK(text_equals(id, id_len, "8"));
    fl_sse_parser_free(parser);
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : ".";
    const char *fixtures[][2] = {
        {"anthropic", "basic_response"},
        {"anthropic", "tool_use_response"},
        {"anthropic", "incomplete_partial_json_response"},
        {"openai-chat", "173417d55340"},
        {"openai-chat", "2018feb66ae1"},
        {"openai-chat", "4cc50a6135d2"},
        {"openai-chat", "569c877e6942"},
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        check_fixture(root, fixtures[i][0], fixtures[i][1]);
    }
    check_accessors();
    check_invalid_utf8_is_replaced();
    check_feed_each_contract();
    check_finish_keeps_complete_items();
    check_last_event_id_is_committed_by_blank_lines();
    return check_summary("test_sse");
}
