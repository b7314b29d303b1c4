/*
 * The stream decoder through the C API: every recorded and hand-written stream with an expected
 * message (tests/decode/expected/) decoded at several chunk sizes must give that message; the
 * typed events come out as JSON; a mid-stream provider error, a truncated stream and bad
 * arguments return the right statuses.
 *
 * Usage: test_decode REPO_ROOT
 */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"

#include "json_text.h"

/* Decodes `input` in chunks of `chunk` bytes (0: at once); returns the final message (malloc'd,
 * through strip_json) and the finish status. Counts the typed events. Every chunk is fed from
 * one reused buffer, overwritten after each feed (the decoder reads it in place and must keep
 * what it still needs). */
static char *decode(const char *provider, const char *input, size_t len, size_t chunk,
                    fl_status *finish_status, size_t *event_count) {
    fl_decoder *decoder = NULL;
    CHECK_OK(fl_decoder_new(provider, strlen(provider), &decoder));
    if (decoder == NULL) {
        return NULL;
    }
    *event_count = 0;
    size_t step = chunk == 0 ? (len == 0 ? 1 : len) : chunk;
    uint8_t *buffer = malloc(step);
    const char *json = NULL;
    size_t json_len = 0;
    bool has_event = false;
    for (size_t at = 0; at < len; at += step) {
        size_t n = len - at < step ? len - at : step;
        memcpy(buffer, input + at, n);
        CHECK_OK(fl_decoder_feed(decoder, buffer, n));
        memset(buffer, 0xA5, n);
        for (;;) {
            CHECK_OK(fl_decoder_next_event(decoder, &json, &json_len, &has_event));
            if (!has_event) {
                break;
            }
            CHECK(json_len > 10 && strncmp(json, "{\"type\":\"", 9) == 0);
            CHECK(json[json_len] == '\0');
            (*event_count)++;
        }
    }
    *finish_status = fl_decoder_finish(decoder, &json, &json_len);
    char *message = strip_json(json, json_len);
    fl_decoder_free(decoder);
    free(buffer);
    return message;
}

static void check_expected(const char *root, const char *provider, const char *dir,
                           const char *name) {
    char input_path[1024], expected_path[1024];
    snprintf(input_path, sizeof input_path, "%s/%s/%s/%s.sse", root, dir, provider, name);
    snprintf(expected_path, sizeof expected_path, "%s/tests/decode/expected/%s/%s.json", root,
             provider, name);
    size_t input_len = 0, expected_len = 0;
    char *input = read_file(input_path, &input_len);
    char *expected_raw = read_file(expected_path, &expected_len);
    CHECK(input != NULL && expected_raw != NULL);
    if (input != NULL && expected_raw != NULL) {
        char *expected = strip_json(expected_raw, expected_len);
        const size_t chunks[] = {0, 1, 13, 512};
        for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
            fl_status status;
            size_t events = 0;
            char *message = decode(provider, input, input_len, chunks[i], &status, &events);
            CHECK_OK(status);
            CHECK(events > 0);
            bool same = message != NULL && json_equal(message, expected);
            CHECK(same);
            if (!same) {
                fprintf(stderr, "    %s/%s, chunks of %zu: got\n%s\n    expected\n%s\n", provider,
                        name, chunks[i], message ? message : "(null)", expected);
            }
            free(message);
        }
        free(expected);
    }
    free(input);
    free(expected_raw);
}

/* Every `tests/decode/expected/<provider>/<name>.json`, against its stream: the recorded one
 * under tests/fixtures/ or the hand-written one under tests/decode/streams/. Returns how many. */
static size_t check_every_expected(const char *root) {
    static const char *providers[] = {"anthropic", "openai-chat", "openai-responses"};
    size_t checked = 0;
    for (size_t p = 0; p < sizeof providers / sizeof providers[0]; p++) {
        char dir_path[1024];
        snprintf(dir_path, sizeof dir_path, "%s/tests/decode/expected/%s", root, providers[p]);
        DIR *dir = opendir(dir_path);
        CHECK(dir != NULL);
        if (dir == NULL) {
            continue;
        }
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL) {
            size_t len = strlen(entry->d_name);
            if (len <= 5 || strcmp(entry->d_name + len - 5, ".json") != 0) {
                continue;
            }
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(len - 5), entry->d_name);
            char recorded[1024];
            snprintf(recorded, sizeof recorded, "%s/tests/fixtures/%s/%s.sse", root, providers[p],
                     name);
            struct stat info;
            const char *source = stat(recorded, &info) == 0 ? "tests/fixtures" : "tests/decode/streams";
            check_expected(root, providers[p], source, name);
            checked++;
        }
        closedir(dir);
    }
    return checked;
}

static void check_failures(const char *root) {
    char path[1024];
    size_t len = 0;
    const char *json = NULL;
    size_t json_len = 0;

    /* A mid-stream overloaded_error: FL_STATUS_PROVIDER_ERROR naming the error, partial text. */
    snprintf(path, sizeof path, "%s/tests/decode/streams/anthropic/error_overloaded.sse", root);
    char *input = read_file(path, &len);
    CHECK(input != NULL);
    if (input != NULL) {
        fl_decoder *decoder = NULL;
        CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
        CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)input, len),
                     FL_STATUS_PROVIDER_ERROR);
        CHECK(strstr(last_error(), "overloaded_error") != NULL);
        CHECK_OK(fl_decoder_message(decoder, &json, &json_len));
        CHECK(strstr(json, "\"type\":\"text\"") != NULL);
        fl_decoder_free(decoder);
        free(input);
    }

    /* No message_stop: FL_STATUS_TRUNCATED with the partial message. */
    snprintf(path, sizeof path, "%s/tests/decode/streams/anthropic/truncated.sse", root);
    input = read_file(path, &len);
    CHECK(input != NULL);
    if (input != NULL) {
        fl_decoder *decoder = NULL;
        CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
        CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)input, len));
        bool complete = true;
        CHECK_OK(fl_decoder_is_complete(decoder, &complete));
        CHECK(!complete);
        CHECK_STATUS(fl_decoder_finish(decoder, &json, &json_len), FL_STATUS_TRUNCATED);
        CHECK(json != NULL && strncmp(json, "{\"id\":", 6) == 0 && strlen(json) == json_len);
        CHECK(strstr(last_error(), "truncated") != NULL);
        /* A second finish answers the same (as in Python and Node): it was
         * FL_STATUS_INVALID_STATE with no view. */
        char *first = strdup(json);
        json = NULL;
        CHECK_STATUS(fl_decoder_finish(decoder, &json, &json_len), FL_STATUS_TRUNCATED);
        CHECK(json != NULL && first != NULL && strcmp(json, first) == 0);
        CHECK(strstr(last_error(), "truncated") != NULL);
        free(first);
        CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)"x", 1), FL_STATUS_INVALID_STATE);
        fl_decoder_free(decoder);
        free(input);
    }

    /* Bad JSON in an event: FL_STATUS_PROTOCOL_ERROR. */
    fl_decoder *decoder = NULL;
    CHECK_OK(fl_decoder_new("openai-chat", 11, &decoder));
    const char *bad = "data: {not json\n\n";
    CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)bad, strlen(bad)),
                 FL_STATUS_PROTOCOL_ERROR);
    fl_decoder_free(decoder);
}

/* The stable code of each failure (fl_decoder_error_code): a provider error event's class, read
 * from its type and its code (tests/decode/error_events.json has the codes of Node and Python). */
static void check_error_codes(void) {
    static const char *cases[][3] = {
        {"anthropic",
         "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
         "\"message\":\"Overloaded\"}}\n\n",
         "overloaded"},
        {"openai-chat",
         "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"tokens\",\"param\":null,"
         "\"code\":\"rate_limit_exceeded\"}}\n\n",
         "rate_limited"},
        {"openai-responses",
         "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\","
         "\"status\":\"failed\",\"error\":{\"code\":\"server_is_overloaded\",\"message\":\"at "
         "capacity\"}}}\n\n",
         "overloaded"},
        {"anthropic",
         "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
         "\"message\":\"Prompt is too long: 210000 tokens > 200000 maximum\"}}\n\n",
         "prompt_too_long"},
        {"anthropic",
         "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
         "\"message\":\"Internal\"}}\n\n",
         "server"},
        /* LM Studio's overflow names no class; its message does (tests/decode/error_events.json). */
        {"openai-chat",
         "data: {\"error\":\"Trying to keep the first 5120 tokens when context the overflows. "
         "However, the model is loaded with context length of only 4096 tokens.\"}\n\n",
         "prompt_too_long"},
        {"openai-chat", "data: {not json\n\n", "protocol"},
    };
    const char *code = "unset";
    const char *json = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_decoder *decoder = NULL;
        CHECK_OK(fl_decoder_new(cases[i][0], strlen(cases[i][0]), &decoder));
        CHECK_OK(fl_decoder_error_code(decoder, &code));
        CHECK(code == NULL);
        CHECK(fl_decoder_feed(decoder, (const uint8_t *)cases[i][1], strlen(cases[i][1])) !=
              FL_STATUS_OK);
        CHECK_OK(fl_decoder_error_code(decoder, &code));
        CHECK(code != NULL && strcmp(code, cases[i][2]) == 0);
        if (code == NULL || strcmp(code, cases[i][2]) != 0) {
            fprintf(stderr, "    case %zu: got %s, expected %s\n", i, code ? code : "(null)",
                    cases[i][2]);
        }
        fl_decoder_free(decoder);
    }
    /* A truncated stream, then a feed after finish; a call that succeeds clears the code. */
    fl_decoder *decoder = NULL;
    CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
    static const char comment[] = ": keep-alive\n\n";
    CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)comment, sizeof comment - 1));
    CHECK_OK(fl_decoder_error_code(decoder, &code));
    CHECK(code == NULL);
    CHECK_STATUS(fl_decoder_finish(decoder, &json, &len), FL_STATUS_TRUNCATED);
    CHECK_OK(fl_decoder_error_code(decoder, &code));
    CHECK(code != NULL && strcmp(code, "stream_truncated") == 0);
    CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)"x", 1), FL_STATUS_INVALID_STATE);
    CHECK_OK(fl_decoder_error_code(decoder, &code));
    CHECK(code != NULL && strcmp(code, "invalid_state") == 0);
    fl_decoder_free(decoder);
    CHECK_STATUS(fl_decoder_error_code(NULL, &code), FL_STATUS_NULL_ARGUMENT);
}

/* finish() called again answers the same, the same message or the same error with the same
 * code, as in Python and Node. Two events that are not JSON, then a message_stop: the core's
 * second finish used to decode what the first failure left queued and answer differently. */
static void check_finish_twice(void) {
    static const char two_bad[] =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],"
        "\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
        "event: content_block_delta\ndata: {first\n\n"
        "event: content_block_delta\ndata: {second\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    const char *json = NULL;
    const char *code = NULL;
    size_t len = 0;
    fl_decoder *decoder = NULL;
    CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
    CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)two_bad, sizeof two_bad - 1),
                 FL_STATUS_PROTOCOL_ERROR);
    char *message = NULL;
    char *error = NULL;
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(fl_decoder_finish(decoder, &json, &len), FL_STATUS_PROTOCOL_ERROR);
        CHECK_OK(fl_decoder_error_code(decoder, &code));
        CHECK(code != NULL && strcmp(code, "protocol") == 0);
        if (i == 0) {
            message = strdup(json);
            error = strdup(last_error());
        } else {
            CHECK(message != NULL && strcmp(json, message) == 0);
            CHECK(error != NULL && strcmp(last_error(), error) == 0);
        }
    }
    free(message);
    free(error);
    fl_decoder_free(decoder);

    /* A complete stream: the same final message each time. */
    static const char whole[] =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\","
        "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":[],"
        "\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
    CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)whole, sizeof whole - 1));
    CHECK_OK(fl_decoder_finish(decoder, &json, &len));
    message = strdup(json);
    CHECK_OK(fl_decoder_finish(decoder, &json, &len));
    CHECK(message != NULL && strcmp(json, message) == 0 && strlen(json) == len);
    CHECK_OK(fl_decoder_error_code(decoder, &code));
    CHECK(code == NULL);
    free(message);
    fl_decoder_free(decoder);
}

static void check_arguments(void) {
    fl_decoder *decoder = NULL;
    const char *json = NULL;
    size_t len = 0;
    bool flag = false;
    CHECK_STATUS(fl_decoder_new("gemini", 6, &decoder), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "gemini") != NULL);
    CHECK_STATUS(fl_decoder_new("anthr\xc3", 6, &decoder), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_decoder_new(NULL, 9, &decoder), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_new("anthropic", 9, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(decoder == NULL);
    CHECK_STATUS(fl_decoder_feed(NULL, (const uint8_t *)"x", 1), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_next_event(NULL, &json, &len, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_message(NULL, &json, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_finish(NULL, &json, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_is_complete(NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_set_record_events(NULL, false), FL_STATUS_NULL_ARGUMENT);

    CHECK_OK(fl_decoder_new("openai-responses", 16, &decoder));
    CHECK_STATUS(fl_decoder_feed(decoder, NULL, 4), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_next_event(decoder, NULL, &len, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_next_event(decoder, &json, NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_next_event(decoder, &json, &len, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_message(decoder, NULL, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_decoder_finish(decoder, &json, NULL), FL_STATUS_NULL_ARGUMENT);
    /* Before any event the message is null. */
    CHECK_OK(fl_decoder_message(decoder, &json, &len));
    CHECK(len == 4 && strcmp(json, "null") == 0);
    /* With events off, nothing is queued but the message still accumulates. */
    CHECK_OK(fl_decoder_set_record_events(decoder, false));
    fl_decoder_free(decoder);
    fl_decoder_free(NULL);
}

/* With typed events off, the sealing events still come (what the executor needs to start a
 * call), as in Python and Node; the other events do not. */
static void check_sealing_events_without_recording(void) {
    static const char stream[] =
        "event: message_start\n"
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
        "\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,"
        "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\n"
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        "event: content_block_delta\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
        "event: content_block_stop\n"
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: content_block_start\n"
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\","
        "\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}\n\n"
        "event: content_block_delta\n"
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\","
        "\"partial_json\":\"{\\\"path\\\":\\\"a\\\"}\"}}\n\n"
        "event: content_block_stop\n"
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n";
    fl_decoder *decoder = NULL;
    const char *json = NULL;
    size_t len = 0;
    bool has = false;
    CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
    CHECK_OK(fl_decoder_set_record_events(decoder, false));
    CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)stream, sizeof stream - 1));
    CHECK_OK(fl_decoder_next_event(decoder, &json, &len, &has));
    CHECK(has && strncmp(json, "{\"type\":\"tool_use_ready\"", 24) == 0 &&
          strstr(json, "\"id\":\"toolu_1\"") != NULL);
    CHECK_OK(fl_decoder_next_event(decoder, &json, &len, &has));
    CHECK(!has);
    fl_decoder_free(decoder);
}

/* After a failing event, the events behind it in the same chunk are not lost: the next feed, or
 * finish, decodes them and queues their typed events (a sealed tool call among them). finish
 * still answers with the failure (the message lacks the broken event), its view holding the
 * message as it stood. */
static void check_events_after_a_failing_event(void) {
    static const char stream[] =
        "event: message_start\n"
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
        "\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,"
        "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
        "event: content_block_delta\n"
        "data: {garbage\n\n"
        "event: content_block_start\n"
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\","
        "\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}}\n\n"
        "event: content_block_delta\n"
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\","
        "\"partial_json\":\"{}\"}}\n\n"
        "event: content_block_stop\n"
        "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\n"
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
        "\"usage\":{\"output_tokens\":5}}\n\n"
        "event: message_stop\n"
        "data: {\"type\":\"message_stop\"}\n\n";
    for (int by_feed = 0; by_feed < 2; by_feed++) {
        fl_decoder *decoder = NULL;
        const char *json = NULL;
        size_t len = 0;
        bool has = false;
        CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
        CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)stream, sizeof stream - 1),
                     FL_STATUS_PROTOCOL_ERROR);
        CHECK_OK(fl_decoder_next_event(decoder, &json, &len, &has));
        CHECK(has && strncmp(json, "{\"type\":\"message_start\"", 23) == 0);
        CHECK_OK(fl_decoder_next_event(decoder, &json, &len, &has));
        CHECK(!has);
        if (by_feed) {
            CHECK_OK(fl_decoder_feed(decoder, NULL, 0));
        }
        CHECK_STATUS(fl_decoder_finish(decoder, &json, &len), FL_STATUS_PROTOCOL_ERROR);
        CHECK(strstr(json, "\"stop_reason\":\"tool_use\"") != NULL);
        bool ready = false;
        bool stop = false;
        while (fl_decoder_next_event(decoder, &json, &len, &has) == FL_STATUS_OK && has) {
            ready = ready || strncmp(json, "{\"type\":\"tool_use_ready\"", 24) == 0;
            stop = stop || strcmp(json, "{\"type\":\"message_stop\"}") == 0;
        }
        CHECK(ready);
        CHECK(stop);
        fl_decoder_free(decoder);
    }
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : ".";
    /* The comparison itself: numbers by value, everything else exactly. */
    CHECK(json_equal("{\"a\":[3.4e-06,1]}", "{\"a\":[0.0000034,1]}"));
    CHECK(!json_equal("{\"a\":1}", "{\"a\":2}"));
    CHECK(!json_equal("{\"a\":\"x1\"}", "{\"a\":\"x2\"}"));
    CHECK(!json_equal("[1]", "[1,2]"));
    /* Every expected message, as the Python and Node suites walk them (a list written here
     * once left out a stream added later). */
    size_t checked = check_every_expected(root);
    CHECK(checked >= 14);
    check_failures(root);
    check_error_codes();
    check_arguments();
    check_sealing_events_without_recording();
    check_events_after_a_failing_event();
    check_finish_twice();
    return check_summary("test_decode");
}
