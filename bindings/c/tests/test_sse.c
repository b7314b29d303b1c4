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

/* Drains every completed item of `parser` into `out` as JSON lines. */
static void drain(fl_sse_parser *parser, buffer *out) {
    for (;;) {
        fl_sse_item item;
        fl_status status = fl_sse_parser_next(parser, &item);
        CHECK_OK(status);
        if (status != FL_STATUS_OK || item.kind == FL_SSE_ITEM_NONE) {
            return;
        }
        if (item.kind == FL_SSE_ITEM_RETRY) {
            char line[64];
            snprintf(line, sizeof line, "{\"retry\":%llu}\n", (unsigned long long)item.retry_ms);
            buffer_append_str(out, line);
            continue;
        }
        CHECK(item.kind == FL_SSE_ITEM_EVENT);
        CHECK(item.event.event_type != NULL && item.event.data != NULL && item.event.id != NULL);
        buffer_append_str(out, "{\"event\":");
        append_json_string(out, item.event.event_type, item.event.event_type_len);
        buffer_append_str(out, ",\"data\":");
        append_json_string(out, item.event.data, item.event.data_len);
        buffer_append_str(out, ",\"id\":");
        append_json_string(out, item.event.id, item.event.id_len);
        buffer_append_str(out, "}\n");
    }
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
    return check_summary("test_sse");
}
