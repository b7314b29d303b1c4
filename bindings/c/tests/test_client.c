/*
 * The streaming client alone through the C API (fl_client_stream_start, fl_client_create and
 * fl_message_stream), against a loopback HTTP server (loopback.h):
 *
 * - a recorded Anthropic stream (tests/fixtures/anthropic/tool_use_response.sse, text and a
 *   tool_use) served byte for byte: the events in order, each the JSON fl_decoder gives for the
 *   same bytes, and the final message equal to tests/decode/expected/ (what `ferroloop decode`
 *   prints for it); the request id from the header and the measurements;
 * - a recorded OpenAI Chat Completions stream (tests/fixtures/openai-chat/2018feb66ae1.sse),
 *   likewise;
 * - an HTTP 529 then success: a `retry` event, then the answer; the whole metrics as JSON
 *   (the request id, the retry, HTTP/1.1, the final usage, the struct's measurements);
 * - an HTTP 400: a typed failure (FL_STATUS_PROVIDER_ERROR, class invalid_request, status 400,
 *   the request id from the header, the provider's message);
 * - a stream cut mid-way: truncated (cause `connection`), the partial message readable;
 * - the whole error as JSON (fl_message_stream_error_json): an HTTP 429 with `retry-after`
 *   (`retry_after_ms`, the error type, status, request id), an HTTP 400 prompt too long with
 *   its sizes (`tokens`, `limit`), an HTTP 529 and an HTTP 503 with `retry-after`
 *   (`retry_after_ms`), a first-byte timeout (`which`, `elapsed_ms`); `null` for a
 *   request that succeeded;
 * - a cancel while a thread waits for the stream, a create cancelled through its token, and a
 *   stream freed mid-way: each connection is closed;
 * - a non-streaming create;
 * - argument errors, and client options the core refuses (a bad base URL, header or key);
 * - a client, an agent and a run made before fork(), in the child: refused (a request would
 *   never run there), and freed without waiting for the parent's thread (it hung); a stream
 *   in flight at the fork never ends there but is freed, a run waiting for its model call
 *   stops when cancelled;
 * - the client's provider and base URL.
 *
 * No network beyond 127.0.0.1. Timeouts are hang guards only, never assertions.
 *
 * Usage: test_client REPO_ROOT
 */
#include <pthread.h>
#include <stdbool.h>

#include "check.h"

#include "json_text.h"
#include "loopback.h"
#include "workers.h"

#define SSE "text/event-stream"
#define EVENT(type, data) "event: " type "\ndata: " data "\n\n"

static const char answer_stream[] =
    EVENT("message_start",
          "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\","
          "\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,"
          "\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}")
    EVENT("content_block_start",
          "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
          "\"text\":\"\"}}")
    EVENT("content_block_delta",
          "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
          "\"text\":\"Hello.\"}}")
    EVENT("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}")
    EVENT("message_delta",
          "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
          "\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}")
    EVENT("message_stop", "{\"type\":\"message_stop\"}");

/* The same answer as a proxy that strips `event:` lines sends it: only the data's `type` names
 * each event. */
#define DATA(data) "data: " data "\n\n"
static const char unnamed_answer_stream[] =
    DATA("{\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\","
         "\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,"
         "\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}")
    DATA("{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
         "\"text\":\"\"}}")
    DATA("{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
         "\"text\":\"Hello.\"}}")
    DATA("{\"type\":\"content_block_stop\",\"index\":0}")
    DATA("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
         "\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}")
    DATA("{\"type\":\"message_stop\"}");
static const char unnamed_overloaded_stream[] =
    DATA("{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}");

static const char answer_message[] =
    "{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\","
    "\"content\":[{\"type\":\"text\",\"text\":\"Hello.\"}],\"stop_reason\":\"end_turn\","
    "\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}";

static const char overloaded_body[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
static const char bad_request_body[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
    "\"message\":\"max_tokens: 999999 > 64000, which is the maximum\"}}";

static const char unavailable_body[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"unavailable\"}}";
static const char rate_limited_body[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}";
static const char prompt_too_long_body[] =
    "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
    "\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}";
/* The loopback server writes the content type as given: a second header line rides along. */
#define JSON_WITH_RETRY_AFTER "application/json\r\nretry-after: 2"

static const char request[] = "{\"model\":\"claude-test\",\"max_tokens\":64,"
                              "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]}";

static const char *root = ".";

/* A client of `provider` at the server's port: no key from the environment, quick retries. */
static fl_client *client_of(const char *provider, const server *s) {
    char options[320];
    snprintf(options, sizeof options,
             "{\"provider\":\"%s\",\"from_env\":false,\"api_key\":\"test-key\","
             "\"base_url\":\"http://127.0.0.1:%d\",\"max_retries\":2,"
             "\"retry_base_delay_ms\":1,\"retry_max_delay_ms\":5}",
             provider, s->port);
    fl_client *client = NULL;
    CHECK_OK(fl_client_new(options, strlen(options), &client));
    return client;
}

static fl_client *client_for(const server *s) { return client_of("anthropic", s); }

/* A client at the server's port that never retries, with `extra` options (`,"key":value`). */
static fl_client *client_without_retries(const server *s, const char *extra) {
    char options[320];
    snprintf(options, sizeof options,
             "{\"from_env\":false,\"api_key\":\"test-key\","
             "\"base_url\":\"http://127.0.0.1:%d\",\"max_retries\":0%s}",
             s->port, extra);
    fl_client *client = NULL;
    CHECK_OK(fl_client_new(options, strlen(options), &client));
    return client;
}

/* Whether the stream's whole error (fl_message_stream_error_json) is `expected`, exactly;
 * prints it when not. */
static bool error_json_is(fl_message_stream *stream, const char *expected) {
    const char *json = NULL;
    size_t len = 0;
    CHECK_OK(fl_message_stream_error_json(stream, &json, &len));
    bool same = json != NULL && json[len] == '\0' && text_equals(json, len, expected);
    if (!same) {
        fprintf(stderr, "    error json: %.*s\n    expected:   %s\n", (int)len,
                json != NULL ? json : "", expected);
    }
    return same;
}

static fl_message_stream *start(fl_client *client) {
    fl_message_stream *stream = NULL;
    CHECK_OK(fl_client_stream_start(client, request, strlen(request), NULL, &stream));
    CHECK(stream != NULL);
    return stream;
}

/* Reads every event until the end into `events` (one per line); returns how many. */
static int drain(fl_message_stream *stream, buffer *events) {
    int count = 0;
    for (;;) {
        fl_agent_next next = FL_AGENT_NEXT_NONE;
        const char *json = NULL;
        size_t len = 0;
        CHECK_OK(fl_message_stream_next_event(stream, HANG_GUARD_MS, &next, &json, &len));
        if (next == FL_AGENT_NEXT_END) {
            CHECK(len == 0);
            return count;
        }
        if (next != FL_AGENT_NEXT_EVENT) {
            CHECK(!"hang guard: no event");
            return count;
        }
        CHECK(json[len] == '\0' && strncmp(json, "{\"type\":\"", 9) == 0);
        buffer_append(events, json, len);
        buffer_append_str(events, "\n");
        count++;
    }
}

/* The stream's message (status returned; the view in *json). */
static fl_status message_of(fl_message_stream *stream, const char **json, size_t *len) {
    *json = NULL;
    *len = 0;
    return fl_message_stream_message(stream, json, len);
}

static int request_id_is(fl_message_stream *stream, const char *expected) {
    const char *id = NULL;
    size_t len = 0;
    CHECK_OK(fl_message_stream_request_id(stream, &id, &len));
    return id != NULL && text_equals(id, len, expected) && id[len] == '\0';
}

/* The typed events and the final message fl_decoder gives for `bytes`. */
static void decode_all(const char *provider, const char *bytes, size_t len, buffer *events,
                       char **message) {
    fl_decoder *decoder = NULL;
    CHECK_OK(fl_decoder_new(provider, strlen(provider), &decoder));
    CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)bytes, len));
    const char *json = NULL;
    size_t json_len = 0;
    bool has_event = false;
    while (fl_decoder_next_event(decoder, &json, &json_len, &has_event) == FL_STATUS_OK &&
           has_event) {
        buffer_append(events, json, json_len);
        buffer_append_str(events, "\n");
    }
    CHECK_OK(fl_decoder_finish(decoder, &json, &json_len));
    *message = strip_json(json, json_len);
    fl_decoder_free(decoder);
}

/* A recorded stream with text and a tool_use, served byte for byte. */
static void recorded_stream(server *s, const char *fixture, size_t fixture_len) {
    fl_client *client = client_for(s);
    fl_message_stream *stream = start(client);
    fl_client_free(client); /* the stream keeps what it needs */
    buffer events = {0};
    int count = drain(stream, &events);
    buffer expected_events = {0};
    char *decoded = NULL;
    decode_all("anthropic", fixture, fixture_len, &expected_events, &decoded);
    CHECK(count > 5);
    CHECK(events.data != NULL && expected_events.data != NULL &&
          strcmp(events.data, expected_events.data) == 0);
    if (events.data != NULL && strstr(events.data, "tool_use_ready") == NULL) {
        fprintf(stderr, "    events:\n%s\n", events.data);
    }
    /* In order: the text before the tool call is sealed. */
    const char *text = events.data ? strstr(events.data, "{\"type\":\"text_delta\"") : NULL;
    const char *sealed = events.data ? strstr(events.data, "{\"type\":\"tool_use_ready\"") : NULL;
    CHECK(text != NULL && sealed != NULL && text < sealed);

    const char *json;
    size_t len;
    CHECK_OK(message_of(stream, &json, &len));
    CHECK(json != NULL && json[len] == '\0');
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/decode/expected/anthropic/tool_use_response.json", root);
    size_t expected_len = 0;
    char *expected_raw = read_file(path, &expected_len);
    CHECK(expected_raw != NULL);
    if (expected_raw != NULL && json != NULL) {
        char *expected = strip_json(expected_raw, expected_len);
        char *got = strip_json(json, len);
        CHECK(json_equal(got, expected));
        CHECK(decoded != NULL && json_equal(got, decoded));
        free(expected);
        free(got);
    }
    fl_client_error error;
    CHECK_OK(fl_message_stream_error(stream, &error));
    CHECK(error.status == FL_STATUS_OK && error.code == NULL && error.http_status == 0);
    CHECK(request_id_is(stream, "req_test_0"));
    fl_request_metrics metrics;
    CHECK_OK(fl_message_stream_metrics(stream, &metrics));
    CHECK(metrics.attempts == 1);
    CHECK(metrics.time_to_first_token_ms >= 0);
    CHECK(metrics.bytes_received == fixture_len);
    /* The end is reported again. */
    fl_agent_next next = FL_AGENT_NEXT_NONE;
    CHECK_OK(fl_message_stream_next_event(stream, 0, &next, &json, &len));
    CHECK(next == FL_AGENT_NEXT_END);
    fl_message_stream_free(stream);

    char *requests = stop_server(s);
    const char *each[2];
    CHECK(split_requests(requests, each, 2) == 1);
    CHECK(strncmp(each[0], "POST /v1/messages HTTP/1.1\r\n", 28) == 0);
    CHECK(strstr(each[0], "\"stream\":true") != NULL);
    free(requests);
    free(expected_raw);
    free(decoded);
    buffer_free(&events);
    buffer_free(&expected_events);
}

/* A recorded OpenAI Chat Completions stream (ending with `data: [DONE]`), served byte for byte:
 * the same events as fl_decoder gives, the message of tests/decode/expected/. */
static void recorded_chat_stream(server *s, const char *name, const char *fixture,
                                 size_t fixture_len) {
    fl_client *client = client_of("openai-chat", s);
    fl_message_stream *stream = start(client);
    buffer events = {0};
    CHECK(drain(stream, &events) > 0);
    buffer expected_events = {0};
    char *decoded = NULL;
    decode_all("openai-chat", fixture, fixture_len, &expected_events, &decoded);
    CHECK(events.data != NULL && expected_events.data != NULL &&
          strcmp(events.data, expected_events.data) == 0);
    const char *json;
    size_t len;
    CHECK_OK(message_of(stream, &json, &len));
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/decode/expected/openai-chat/%s.json", root, name);
    size_t expected_len = 0;
    char *expected_raw = read_file(path, &expected_len);
    CHECK(expected_raw != NULL && json != NULL);
    if (expected_raw != NULL && json != NULL) {
        char *expected = strip_json(expected_raw, expected_len);
        char *got = strip_json(json, len);
        CHECK(json_equal(got, expected));
        CHECK(decoded != NULL && json_equal(got, decoded));
        free(expected);
        free(got);
    }
    fl_message_stream_free(stream);
    fl_client_free(client);
    char *requests = stop_server(s);
    /* The base URL is the API root (OpenAI's includes /v1): the client appends the path. */
    CHECK(strstr(requests, "POST /chat/completions HTTP/1.1\r\n") != NULL);
    free(requests);
    free(expected_raw);
    free(decoded);
    buffer_free(&events);
    buffer_free(&expected_events);
}

/* Checks that `stream` ended with answer_message after `attempts` attempts; returns the message
 * (owned by the stream). */
static const char *answered_after(fl_message_stream *stream, uint32_t attempts) {
    const char *json = NULL;
    size_t len = 0;
    CHECK_OK(message_of(stream, &json, &len));
    CHECK(json != NULL && text_equals(json, len, answer_message));
    fl_request_metrics metrics;
    CHECK_OK(fl_message_stream_metrics(stream, &metrics));
    CHECK(metrics.attempts == attempts);
    return json;
}

/* Streams a request of `client` to its end into `events`, whose first line must be an overload
 * retry before attempt 2 that starts with `retry` (its status given or `null`). */
static fl_message_stream *retried_once(fl_client *client, buffer *events, const char *retry) {
    fl_message_stream *stream = start(client);
    drain(stream, events);
    CHECK(events->data != NULL && strncmp(events->data, retry, strlen(retry)) == 0);
    CHECK(events->data != NULL && strstr(events->data, "\"code\":\"overloaded\"") != NULL);
    CHECK(events->data != NULL && strstr(events->data, "\"overloaded\":true") != NULL);
    return stream;
}

/* An HTTP 529, retried, then the answer. */
static void retried(server *s) {
    fl_client *client = client_for(s);
    buffer events = {0};
    fl_message_stream *stream =
        retried_once(client, &events, "{\"type\":\"retry\",\"attempt\":2,\"status\":529,");
    const char *json = answered_after(stream, 2);
    fl_request_metrics metrics;
    CHECK_OK(fl_message_stream_metrics(stream, &metrics));
    CHECK(request_id_is(stream, "req_test_1")); /* the answer's, not the 529's */
    CHECK(error_json_is(stream, "null"));        /* succeeded: no error */
    /* The whole metrics as JSON: what the struct lacks (the request id, the retry as the stream
     * gave it, the HTTP version, the final usage), the struct's measurements in milliseconds. */
    const char *measured = NULL;
    size_t measured_len = 0;
    CHECK_OK(fl_message_stream_metrics_json(stream, &measured, &measured_len));
    CHECK(measured != NULL && measured[measured_len] == '\0');
    const char *retry_end = events.data != NULL ? strchr(events.data, '\n') : NULL;
    CHECK(retry_end != NULL);
    if (measured != NULL && retry_end != NULL && json != NULL) {
        char expected[1024];
        snprintf(expected, sizeof expected,
                 "{\"request_id\":\"req_test_1\",\"attempts\":2,\"retries\":[%.*s],"
                 "\"http_version\":\"HTTP/1.1\",\"time_to_headers_ms\":",
                 (int)(retry_end - events.data), events.data);
        CHECK(strncmp(measured, expected, strlen(expected)) == 0);
        snprintf(expected, sizeof expected, ",\"bytes_received\":%llu,\"events\":6,\"usage\":",
                 (unsigned long long)metrics.bytes_received);
        const char *usage = strstr(measured, expected);
        CHECK(usage != NULL);
        /* The usage is the final message's (both end with it). */
        const char *final_usage = strstr(json, "\"usage\":");
        CHECK(usage != NULL && final_usage != NULL &&
              strcmp(usage + strlen(expected) - 8, final_usage) == 0);
        const char *keys[] = {"\"time_to_headers_ms\":", "\"time_to_first_event_ms\":",
                              "\"time_to_first_token_ms\":", "\"total_ms\":"};
        double values[] = {metrics.time_to_headers_ms, metrics.time_to_first_event_ms,
                           metrics.time_to_first_token_ms, metrics.total_ms};
        for (size_t i = 0; i < 4; i++) {
            const char *at = strstr(measured, keys[i]);
            CHECK(values[i] >= 0 && at != NULL && strtod(at + strlen(keys[i]), NULL) == values[i]);
        }
        if (checks_failed) {
            fprintf(stderr, "    metrics: %s\n", measured);
        }
    }
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

/* A stream without `event:` lines: an overloaded_error first event is retried, and the answer
 * after it is whole (it was reported truncated: its message_stop went unseen). */
static void unnamed_events(server *s) {
    fl_client *client = client_for(s);
    buffer events = {0};
    fl_message_stream *stream =
        retried_once(client, &events, "{\"type\":\"retry\",\"attempt\":2,\"status\":null,");
    answered_after(stream, 2);
    CHECK(error_json_is(stream, "null"));
    fl_request_metrics metrics;
    CHECK_OK(fl_message_stream_metrics(stream, &metrics));
    CHECK(metrics.time_to_first_token_ms >= 0);
    if (checks_failed) {
        fprintf(stderr, "    events: %s\n", events.data != NULL ? events.data : "");
    }
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

/* An HTTP 400: a typed failure. */
static void bad_request(server *s) {
    fl_client *client = client_for(s);
    fl_message_stream *stream = start(client);
    buffer events = {0};
    CHECK(drain(stream, &events) == 0); /* a 400 is not retried */
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_PROVIDER_ERROR);
    CHECK(strstr(last_error(), "max_tokens: 999999 > 64000") != NULL);
    CHECK(strstr(last_error(), "req_test_0") != NULL);
    CHECK(error.status == FL_STATUS_PROVIDER_ERROR);
    CHECK(error.code != NULL && strcmp(error.code, "invalid_request") == 0);
    CHECK(error.cause_code == NULL);
    CHECK(error.http_status == 400);
    CHECK(request_id_is(stream, "req_test_0"));
    const char *json;
    size_t len;
    CHECK_STATUS(message_of(stream, &json, &len), FL_STATUS_PROVIDER_ERROR);
    CHECK(json != NULL && text_equals(json, len, "null"));
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

/* Starts a request the server refuses: no event, and the error is `expected` as JSON. */
static void refused_as(fl_client *client, const char *expected) {
    fl_message_stream *stream = start(client);
    buffer events = {0};
    CHECK(drain(stream, &events) == 0);
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_PROVIDER_ERROR);
    CHECK(error_json_is(stream, expected));
    fl_message_stream_free(stream);
    buffer_free(&events);
}

/* The whole error as JSON: an HTTP 429 with `retry-after` (not retried), then an HTTP 400
 * prompt too long with its sizes, then an HTTP 529 and an HTTP 503 with `retry-after`; refused
 * before the end. */
static void error_json(server *s) {
    fl_client *client = client_without_retries(s, "");
    fl_message_stream *limited = start(client);
    const char *json = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_message_stream_error_json(limited, &json, &len), FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "fl_message_stream_error_json") != NULL);
    buffer events = {0};
    CHECK(drain(limited, &events) == 0); /* max_retries 0: no retry event */
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(limited, &error), FL_STATUS_PROVIDER_ERROR);
    CHECK(error.code != NULL && strcmp(error.code, "rate_limited") == 0);
    CHECK(error.http_status == 429);
    CHECK(error_json_is(limited,
                        "{\"code\":\"rate_limited\",\"message\":\"rate limited: HTTP 429 "
                        "rate_limit_error: slow down (request id req_test_0)\",\"status\":429,"
                        "\"request_id\":\"req_test_0\",\"error_type\":\"rate_limit_error\","
                        "\"retry_after_ms\":2000.0}"));
    refused_as(client,
               "{\"code\":\"prompt_too_long\",\"message\":\"prompt too long: HTTP 400 "
               "invalid_request_error: prompt is too long: 210000 tokens > 200000 "
               "maximum (request id req_test_1)\",\"status\":400,"
               "\"request_id\":\"req_test_1\",\"error_type\":\"invalid_request_error\","
               "\"tokens\":210000,\"limit\":200000}");
    /* An overload's 529 with `retry-after`: the same key, the same meaning, as a rate limit's. */
    refused_as(client,
               "{\"code\":\"overloaded\",\"message\":\"overloaded: HTTP 529 "
               "overloaded_error: Overloaded (request id req_test_2)\",\"status\":529,"
               "\"request_id\":\"req_test_2\",\"error_type\":\"overloaded_error\","
               "\"retry_after_ms\":2000.0}");
    /* A server error's 503 with `retry-after` (RFC 9110's "come back later"): the same key. */
    refused_as(client,
               "{\"code\":\"server\",\"message\":\"server error: HTTP 503 "
               "api_error: unavailable (request id req_test_3)\",\"status\":503,"
               "\"request_id\":\"req_test_3\",\"error_type\":\"api_error\","
               "\"retry_after_ms\":2000.0}");
    fl_message_stream_free(limited);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

/* A request whose answer never comes: a first-byte timeout, its watchdog and elapsed time in
 * the JSON. */
static void timed_out(server *s) {
    fl_client *client = client_without_retries(s, ",\"first_byte_timeout_ms\":200");
    fl_message_stream *stream = start(client);
    buffer events = {0};
    drain(stream, &events);
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_TIMEOUT);
    const char *json = NULL;
    size_t len = 0;
    CHECK_OK(fl_message_stream_error_json(stream, &json, &len));
    CHECK(json != NULL && strncmp(json, "{\"code\":\"timeout\",", 18) == 0);
    CHECK(json != NULL && strstr(json, ",\"status\":null,\"request_id\":null,"
                                      "\"which\":\"first byte\",\"elapsed_ms\":") != NULL);
    const char *elapsed = json != NULL ? strstr(json, "\"elapsed_ms\":") : NULL;
    CHECK(elapsed != NULL && strtod(elapsed + 13, NULL) >= 200.0);
    if (checks_failed) {
        fprintf(stderr, "    error json: %.*s\n", (int)len, json != NULL ? json : "");
    }
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

/* A stream cut mid-way: truncated, with the partial message. */
static void cut(server *s) {
    fl_client *client = client_for(s);
    fl_message_stream *stream = start(client);
    buffer events = {0};
    CHECK(drain(stream, &events) > 0);
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_TRUNCATED);
    CHECK(error.code != NULL && strcmp(error.code, "stream_truncated") == 0);
    CHECK(error.cause_code != NULL && strcmp(error.cause_code, "connection") == 0);
    const char *json;
    size_t len;
    CHECK_STATUS(message_of(stream, &json, &len), FL_STATUS_TRUNCATED);
    CHECK(json != NULL && strstr(json, "\"text\":\"I'll check the current weather in Paris for you.\"") != NULL);
    CHECK(json != NULL && strstr(json, "\"stop_reason\":null") != NULL);
    CHECK(request_id_is(stream, "req_test_0"));
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
}

static void *cancel_stream_later(void *stream) {
    sleep_ms(50);
    CHECK_OK(fl_message_stream_cancel(stream));
    return NULL;
}

/* What received() read of the server's request log before the end of the scenario. */
static buffer received_early = {0};

static int occurrences(const char *text, const char *needle) {
    int count = 0;
    for (const char *at = text != NULL ? strstr(text, needle) : NULL; at != NULL; at = strstr(at + 1, needle)) {
        count++;
    }
    return count;
}

/* Requests of 40 KB, refused twice (529) then answered: the three reach the server, whole and
 * in order, though together they pass a pipe's capacity (the server's log is a file). */
enum { LARGE_PROMPT_BYTES = 40000 };
static void large_requests(server *s) {
    static char large[LARGE_PROMPT_BYTES + 256];
    int head = snprintf(large, sizeof large,
                        "{\"model\":\"claude-test\",\"max_tokens\":64,"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"");
    memset(large + head, 'x', LARGE_PROMPT_BYTES);
    snprintf(large + head + LARGE_PROMPT_BYTES, sizeof large - (size_t)head - LARGE_PROMPT_BYTES,
             "\"}]}");
    fl_client *client = client_for(s);
    fl_message_stream *stream = NULL;
    CHECK_OK(fl_client_stream_start(client, large, strlen(large), NULL, &stream));
    buffer events = {0};
    drain(stream, &events);
    answered_after(stream, 3);
    fl_message_stream_free(stream);
    fl_client_free(client);
    char *requests = stop_server(s);
    const char *each[4];
    CHECK(split_requests(requests, each, 4) == 3);
    for (int i = 0; i < 3; i++) {
        const char *prompt = strstr(each[i], "\"content\":\"");
        CHECK(prompt != NULL && strspn(prompt + 11, "x") == LARGE_PROMPT_BYTES);
    }
    free(requests);
    buffer_free(&events);
}

/* Waits (hang guard) until the server has recorded `count` occurrences of `needle` in the
 * requests it received, reading its log into received_early. A fixed delay before a cancel or a
 * free raced the client's writes under valgrind on a loaded machine: the server never saw the
 * body of a request cancelled before it was sent. */
static bool received(server *s, const char *needle, int count) {
    char chunk[4096];
    for (int waited = 0; waited < HANG_GUARD_MS;) {
        if (occurrences(received_early.data, needle) >= count) return true;
        ssize_t n = read(s->requests_fd, chunk, sizeof chunk);
        if (n > 0) {
            buffer_append(&received_early, chunk, (size_t)n);
        } else { /* at the log's end: the server has not written more yet */
            sleep_ms(10);
            waited += 10;
        }
    }
    return false;
}

typedef struct {
    server *s;
    fl_cancel_token *token;
} cancel_when;

/* Cancels the token once the server has the whole non-streaming request. */
static void *cancel_when_create_received(void *arg) {
    cancel_when *when = arg;
    CHECK(received(when->s, "\"stream\":false", 1));
    CHECK_OK(fl_cancel_token_cancel(when->token));
    return NULL;
}

/* Requests the server never answers: a cancel while a thread waits, a create cancelled by its
 * token, a stream freed mid-way. Each connection is closed by the client. */
static void cancellation(server *s) {
    fl_client *client = client_for(s);
    fl_message_stream *stream = start(client);
    fl_agent_next next = FL_AGENT_NEXT_EVENT;
    const char *json;
    size_t len = 1;
    CHECK_OK(fl_message_stream_next_event(stream, 20, &next, &json, &len));
    CHECK(next == FL_AGENT_NEXT_NONE && len == 0);
    start_worker(cancel_stream_later, stream);
    buffer events = {0};
    CHECK(drain(stream, &events) == 0); /* woken by the cancel, not the hang guard */
    join_workers();
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_CANCELLED);
    CHECK(error.code != NULL && strcmp(error.code, "aborted") == 0);
    CHECK_STATUS(message_of(stream, &json, &len), FL_STATUS_CANCELLED);
    fl_message_stream_free(stream);

    fl_cancel_token *token = NULL;
    CHECK_OK(fl_cancel_token_new(&token));
    cancel_when when = {s, token};
    start_worker(cancel_when_create_received, &when);
    fl_message_stream *created = NULL;
    CHECK_OK(fl_client_create(client, request, strlen(request), token, &created));
    join_workers();
    CHECK(created != NULL);
    CHECK_STATUS(fl_message_stream_error(created, &error), FL_STATUS_CANCELLED);
    fl_message_stream_free(created);
    fl_cancel_token_free(token);

    /* Freed without being read: the request goes on the client's thread, then is dropped. */
    stream = start(client);
    CHECK(received(s, REQUEST_MARK, 3)); /* sent before it is freed */
    fl_message_stream_free(stream);
    fl_client_free(client);

    /* Wait (hang guard) for the server to see all three connections closed. */
    char *requests = NULL;
    for (int waited = 0; waited < HANG_GUARD_MS; waited += 50) {
        int status = 0;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = -1;
            break;
        }
        sleep_ms(50);
    }
    buffer all = received_early; /* what the cancelling worker read comes first */
    received_early = (buffer){0};
    if (s->pid > 0) {
        char *rest = stop_server(s);
        buffer_append_str(&all, rest);
        free(rest);
        requests = all.data;
    } else {
        char chunk[4096];
        ssize_t n;
        while ((n = read(s->requests_fd, chunk, sizeof chunk)) > 0) buffer_append(&all, chunk, (size_t)n);
        close(s->requests_fd);
        buffer_append_str(&all, "");
        requests = all.data;
    }
    CHECK(occurrences(requests, CLOSED_MARK) == 3);
    CHECK(strstr(requests, "\"stream\":false") != NULL); /* the create */
    free(requests);
    buffer_free(&events);
}

/* A reader of `stream` until its end, on a worker: it retries a refusal (the main thread's
 * probe was in its call) and keeps the status and kind of its last call. */
typedef struct {
    fl_message_stream *stream;
    fl_status status;
    fl_agent_next next;
} reader;

static void *read_to_end(void *arg) {
    reader *r = arg;
    const char *json = NULL;
    size_t len = 0;
    do {
        r->status = fl_message_stream_next_event(r->stream, -1, &r->next, &json, &len);
    } while (r->status == FL_STATUS_INVALID_STATE ||
             (r->status == FL_STATUS_OK && r->next == FL_AGENT_NEXT_EVENT));
    return NULL;
}

/* Hang guard of concurrent_readers: cancels the stream after HANG_GUARD_MS unless told to stop
 * first (the scenario is over). */
typedef struct {
    fl_message_stream *stream;
    pthread_mutex_t lock;
    pthread_cond_t done_signal;
    int done;
    int fired;
} hang_guard;

static void *cancel_on_hang(void *arg) {
    hang_guard *guard = arg;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += HANG_GUARD_MS / 1000;
    pthread_mutex_lock(&guard->lock);
    while (!guard->done) {
        if (pthread_cond_timedwait(&guard->done_signal, &guard->lock, &deadline) != 0) break;
    }
    guard->fired = !guard->done;
    pthread_mutex_unlock(&guard->lock);
    if (guard->fired) fl_message_stream_cancel(guard->stream);
    return NULL;
}

/* Two threads reading one stream (a response that never comes): while the first waits with no
 * limit, a second fl_message_stream_next_event returns FL_STATUS_INVALID_STATE at once, as a
 * second driver of a turn or run does, and the other functions answer without waiting for the
 * reader. They used to wait for the first call to return, whatever their own timeout: here,
 * until the hang guard cancelled the stream. */
static void concurrent_readers(server *s) {
    fl_client *client = client_for(s);
    fl_message_stream *stream = start(client);
    reader first = {stream, FL_STATUS_OK, FL_AGENT_NEXT_NONE};
    hang_guard guard = {stream, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    start_worker(cancel_on_hang, &guard);
    start_worker(read_to_end, &first);
    fl_status status = FL_STATUS_OK;
    fl_agent_next next = FL_AGENT_NEXT_NONE;
    const char *json = NULL;
    size_t len = 0;
    /* NONE while the worker is not in its call yet. The probe waits for nothing and the main
     * thread sleeps between probes: a probe that waited itself would hold the stream between
     * two of the worker's tries, which under valgrind (one thread runs at a time) never found it
     * free, and the two readers refused each other until the hang guard fired. */
    const struct timespec pause = {0, 1000000};
    for (;;) {
        status = fl_message_stream_next_event(stream, 0, &next, &json, &len);
        if (status != FL_STATUS_OK || next != FL_AGENT_NEXT_NONE) break;
        nanosleep(&pause, NULL);
    }
    CHECK_STATUS(status, FL_STATUS_INVALID_STATE);
    /* The worker is in its call now, waiting with no limit, until the stream is cancelled: a
     * second reader is refused at once, whatever its own timeout (no limit either). */
    status = fl_message_stream_next_event(stream, -1, &next, &json, &len);
    CHECK_STATUS(status, FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "in progress") != NULL);
    const char *id = NULL;
    size_t id_len = 1;
    CHECK_OK(fl_message_stream_request_id(stream, &id, &id_len));
    CHECK(id != NULL && id_len == 0);
    CHECK_STATUS(message_of(stream, &json, &len), FL_STATUS_INVALID_STATE); /* not ended yet */
    pthread_mutex_lock(&guard.lock);
    CHECK(!guard.fired);
    guard.done = 1;
    pthread_cond_signal(&guard.done_signal);
    pthread_mutex_unlock(&guard.lock);
    CHECK_OK(fl_message_stream_cancel(stream));
    join_workers();
    CHECK(first.status == FL_STATUS_OK && first.next == FL_AGENT_NEXT_END);
    CHECK_STATUS(message_of(stream, &json, &len), FL_STATUS_CANCELLED);
    fl_message_stream_free(stream);
    fl_client_free(client);
    free(stop_server(s));
}

/* A non-streaming create: the response body, its request id, one attempt. */
static void create(server *s) {
    fl_client *client = client_for(s);
    fl_message_stream *created = NULL;
    CHECK_OK(fl_client_create(client, request, strlen(request), NULL, &created));
    CHECK(created != NULL);
    const char *json;
    size_t len;
    CHECK_OK(message_of(created, &json, &len));
    CHECK(json != NULL && text_equals(json, len, answer_message));
    fl_client_error error;
    CHECK_OK(fl_message_stream_error(created, &error));
    CHECK(request_id_is(created, "req_test_0"));
    fl_request_metrics metrics;
    CHECK_OK(fl_message_stream_metrics(created, &metrics));
    CHECK(metrics.attempts == 1);
    fl_agent_next next = FL_AGENT_NEXT_NONE;
    CHECK_OK(fl_message_stream_next_event(created, 0, &next, &json, &len));
    CHECK(next == FL_AGENT_NEXT_END);
    fl_message_stream_free(created);
    fl_client_free(client);
    char *requests = stop_server(s);
    CHECK(strstr(requests, "\"stream\":false") != NULL);
    free(requests);
}

static void misuse(void) {
    fl_client *client = NULL;
    /* No retries: a refused connection is retried with backoff (about 80 s with the defaults),
     * which would be all this test's time. */
    const char *options = "{\"from_env\":false,\"base_url\":\"http://127.0.0.1:9\",\"max_retries\":0}";
    /* Options that parse but make no client (the core refuses them): nothing is written to
     * `out`, nothing leaks. */
    const char *refused[] = {
        "{\"from_env\":false,\"base_url\":\"not a url\"}",
        "{\"from_env\":false,\"headers\":{\"x-a\":\"line\\nbreak\"}}",
        "{\"from_env\":false,\"api_key\":\"key\\n\"}",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        fl_client *none = NULL;
        CHECK_STATUS(fl_client_new(refused[i], strlen(refused[i]), &none), FL_STATUS_INVALID_ARGUMENT);
        CHECK(none == NULL);
        CHECK(strstr(last_error(), "invalid client configuration") != NULL);
    }
    CHECK_OK(fl_client_new(options, strlen(options), &client));
    fl_message_stream *stream = NULL;
    CHECK_STATUS(fl_client_stream_start(client, "[1]", 3, NULL, &stream), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "must be a JSON object") != NULL);
    /* Betas that are not flags are refused (they were dropped without a word). */
    const char *bad_betas = "{\"model\":\"m\",\"betas\":[\"ok\",5]}";
    CHECK_STATUS(fl_client_stream_start(client, bad_betas, strlen(bad_betas), NULL, &stream),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "betas must be a flag or an array of flags (strings): item 1 is a number") != NULL);
    CHECK_STATUS(fl_client_create(client, bad_betas, strlen(bad_betas), NULL, &stream),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(stream == NULL);
    CHECK_STATUS(fl_client_stream_start(client, "{", 1, NULL, &stream), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_client_create(client, "\xff", 1, NULL, &stream), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_client_stream_start(NULL, request, strlen(request), NULL, &stream),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_client_stream_start(client, request, strlen(request), NULL, NULL),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK(stream == NULL);
    CHECK_STATUS(fl_message_stream_cancel(NULL), FL_STATUS_NULL_ARGUMENT);
    fl_message_stream_free(NULL);
    /* Nothing listens on port 9: the stream ends with a connection failure, and the getters
     * refuse to answer before its end. */
    CHECK_OK(fl_client_stream_start(client, request, strlen(request), NULL, &stream));
    fl_client_error error;
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_INVALID_STATE);
    buffer events = {0};
    drain(stream, &events);
    CHECK_STATUS(fl_message_stream_error(stream, &error), FL_STATUS_CONNECTION_ERROR);
    CHECK(error.code != NULL && strcmp(error.code, "connection") == 0);
    char description[128];
    size_t written = 0;
    CHECK_OK(fl_status_message(FL_STATUS_TIMEOUT, description, sizeof description, &written));
    CHECK(strcmp(description, "a request timed out") == 0);
    fl_message_stream_free(stream);
    fl_client_free(client);
    buffer_free(&events);
}

/* In a child forked after the client was made: what the child may not do (its requests would
 * never run: the client's thread is the parent's) and what it may (free everything). Returns
 * the number of failed checks (the child's exit status). */
static int forked_child_checks(fl_client *client, fl_agent *agent, fl_agent_run *run,
                               fl_message_stream *in_flight, fl_agent_run *waiting) {
    int failures = 0;
    /* In flight at the fork: the stream never ends here (its request ran on the parent's
     * thread) and is freed at once; the run waiting for its model call stops when cancelled. */
    fl_agent_next found = FL_AGENT_NEXT_END;
    const char *view = NULL;
    size_t view_len = 0;
    if (fl_message_stream_next_event(in_flight, 50, &found, &view, &view_len) != FL_STATUS_OK ||
        found != FL_AGENT_NEXT_NONE) {
        fprintf(stderr, "child: the stream in flight did not wait\n");
        failures++;
    }
    fl_message_stream_free(in_flight);
    if (fl_agent_run_cancel(waiting) != FL_STATUS_OK) failures++;
    int aborted = 0;
    for (int guard = 0; guard < 100; guard++) {
        found = FL_AGENT_NEXT_NONE;
        if (fl_agent_run_next_event(waiting, HANG_GUARD_MS, &found, &view, &view_len) != FL_STATUS_OK ||
            found != FL_AGENT_NEXT_EVENT) {
            break;
        }
        if (strstr(view, "\"type\":\"stop\"") != NULL) {
            aborted = strstr(view, "\"reason\":\"aborted\"") != NULL;
        }
    }
    if (!aborted) {
        fprintf(stderr, "child: the run in flight did not stop when cancelled\n");
        failures++;
    }
    fl_agent_run_free(waiting);
    fl_message_stream *stream = NULL;
    if (fl_client_stream_start(client, request, strlen(request), NULL, &stream) !=
            FL_STATUS_INVALID_STATE ||
        stream != NULL || strstr(last_error(), "before fork()") == NULL) {
        fprintf(stderr, "child: stream_start: %s\n", last_error());
        failures++;
    }
    if (fl_client_create(client, request, strlen(request), NULL, &stream) != FL_STATUS_INVALID_STATE ||
        stream != NULL) {
        fprintf(stderr, "child: create: %s\n", last_error());
        failures++;
    }
    fl_agent *made_here = NULL;
    const char *options = "{\"model\":\"m\"}";
    if (fl_agent_new(client, NULL, options, strlen(options), &made_here) != FL_STATUS_INVALID_STATE ||
        made_here != NULL) {
        fprintf(stderr, "child: agent_new: %s\n", last_error());
        failures++;
    }
    fl_agent_run *started_here = NULL;
    if (fl_agent_run_start_prompt(agent, "hi", 2, NULL, &started_here) != FL_STATUS_INVALID_STATE ||
        started_here != NULL) {
        fprintf(stderr, "child: run_start: %s\n", last_error());
        failures++;
    }
    /* The parent's run, driven here: its model call fails at once (no request hangs). */
    int stopped = 0;
    for (int guard = 0; guard < 100; guard++) {
        fl_agent_next next = FL_AGENT_NEXT_NONE;
        const char *json = NULL;
        size_t len = 0;
        if (fl_agent_run_next_event(run, HANG_GUARD_MS, &next, &json, &len) != FL_STATUS_OK ||
            next != FL_AGENT_NEXT_EVENT) {
            break;
        }
        if (strstr(json, "\"type\":\"stop\"") != NULL) {
            stopped = strstr(json, "\"error_code\":\"invalid_configuration\"") != NULL &&
                      strstr(json, "before fork()") != NULL;
        }
    }
    if (!stopped) {
        fprintf(stderr, "child: the parent's run did not stop as expected\n");
        failures++;
    }
    fl_agent_run_free(run);
    fl_agent_free(agent);
    fl_client_free(client); /* the last owner: returns without the parent's thread */
    return failures;
}

static void forked_child(server *s) {
    fl_client *client = client_for(s); /* the server holds both requests, never answering */
    fl_agent *agent = NULL;
    const char *agent_options = "{\"model\":\"m\"}";
    CHECK_OK(fl_agent_new(client, NULL, agent_options, strlen(agent_options), &agent));
    fl_agent_run *run = NULL;
    CHECK_OK(fl_agent_run_start_prompt(agent, "hi", 2, NULL, &run));
    /* In flight at the fork: a stream, and a run waiting for its model call. */
    fl_message_stream *in_flight = start(client);
    fl_agent_run *waiting = NULL;
    CHECK_OK(fl_agent_run_start_prompt(agent, "hi", 2, NULL, &waiting));
    fl_agent_next found = FL_AGENT_NEXT_NONE;
    const char *view = NULL;
    size_t view_len = 0;
    CHECK_OK(fl_agent_run_next_event(waiting, HANG_GUARD_MS, &found, &view, &view_len));
    CHECK(found == FL_AGENT_NEXT_EVENT && strstr(view, "\"type\":\"turn_start\"") != NULL);
    CHECK_OK(fl_agent_run_next_event(waiting, 50, &found, &view, &view_len));
    CHECK(found == FL_AGENT_NEXT_NONE);
    CHECK_OK(fl_message_stream_next_event(in_flight, 50, &found, &view, &view_len));
    CHECK(found == FL_AGENT_NEXT_NONE);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        int failures = forked_child_checks(client, agent, run, in_flight, waiting);
        /* Exits through exec: at an exit, valgrind would count the runtime of the parent's
         * client (kept, never dropped, in the child) as possibly lost, since the parent's
         * threads that point into it do not exist here; the child's memory is no finding of
         * this test. */
        execl("/bin/sh", "sh", "-c", failures == 0 ? "exit 0" : "exit 1", (char *)NULL);
        _exit(2);
    }
    CHECK(child > 0);
    CHECK(child_exited_cleanly(child, HANG_GUARD_MS));
    /* The parent's handles are untouched by the child. */
    fl_message_stream_free(in_flight);
    fl_agent_run_free(waiting);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    fl_client_free(client);
    /* The server takes one connection at a time: the second request may still wait in its
     * backlog when it is stopped. */
    char *requests = stop_server(s);
    const char *each[3];
    int requests_seen = split_requests(requests, each, 3);
    CHECK(requests_seen == 1 || requests_seen == 2);
    free(requests);
}

/* The client's provider and base URL, as Python's and Node's getters give them: views that
 * stay valid until the client is freed, a request made in between. */
static void getters(server *s) {
    fl_client *client = client_of("openai-chat", s);
    const char *provider = NULL;
    size_t provider_len = 0;
    CHECK_OK(fl_client_provider(client, &provider, &provider_len));
    const char *url = NULL;
    size_t url_len = 0;
    CHECK_OK(fl_client_base_url(client, &url, &url_len));
    fl_message_stream *stream = start(client);
    buffer events = {0};
    drain(stream, &events);
    fl_message_stream_free(stream);
    char expected[64];
    snprintf(expected, sizeof expected, "http://127.0.0.1:%d", s->port);
    CHECK(provider != NULL && text_equals(provider, provider_len, "openai-chat") &&
          provider[provider_len] == '\0');
    CHECK(url != NULL && text_equals(url, url_len, expected) && url[url_len] == '\0');
    CHECK_STATUS(fl_client_provider(NULL, &provider, &provider_len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_client_provider(client, NULL, &provider_len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_client_base_url(client, &url, NULL), FL_STATUS_NULL_ARGUMENT);
    fl_client_free(client);
    free(stop_server(s));
    buffer_free(&events);
    /* The defaults: Anthropic's public endpoint; a trailing slash is dropped. */
    const char *defaults = "{\"from_env\":false}";
    CHECK_OK(fl_client_new(defaults, strlen(defaults), &client));
    CHECK_OK(fl_client_provider(client, &provider, &provider_len));
    CHECK(text_equals(provider, provider_len, "anthropic"));
    CHECK_OK(fl_client_base_url(client, &url, &url_len));
    CHECK(text_equals(url, url_len, "https://api.anthropic.com"));
    fl_client_free(client);
    const char *slash = "{\"provider\":\"openai-responses\",\"from_env\":false,"
                        "\"base_url\":\"http://127.0.0.1:9/v1/\"}";
    CHECK_OK(fl_client_new(slash, strlen(slash), &client));
    CHECK_OK(fl_client_provider(client, &provider, &provider_len));
    CHECK(text_equals(provider, provider_len, "openai-responses"));
    CHECK_OK(fl_client_base_url(client, &url, &url_len));
    CHECK(text_equals(url, url_len, "http://127.0.0.1:9/v1"));
    fl_client_free(client);
}

int main(int argc, char **argv) {
    if (argc > 1) root = argv[1];
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/anthropic/tool_use_response.sse", root);
    size_t fixture_len = 0;
    char *fixture = read_file(path, &fixture_len);
    if (fixture == NULL) return 1;
    const char *chat_name = "2018feb66ae1"; /* text and tool calls */
    snprintf(path, sizeof path, "%s/tests/fixtures/openai-chat/%s.sse", root, chat_name);
    size_t chat_len = 0;
    char *chat = read_file(path, &chat_len);
    if (chat == NULL) return 1;

    const reply recorded_replies[] = {{"200 OK", SSE, fixture, 0}};
    const reply chat_replies[] = {{"200 OK", SSE, chat, 0}};
    const reply retry_replies[] = {{"529 Site Overloaded", "application/json", overloaded_body, 0},
                                   {"200 OK", SSE, answer_stream, 0}};
    const reply unnamed_replies[] = {{"200 OK", SSE, unnamed_overloaded_stream, 0},
                                     {"200 OK", SSE, unnamed_answer_stream, 0}};
    const reply large_replies[] = {{"529 Site Overloaded", "application/json", overloaded_body, 0},
                                   {"529 Site Overloaded", "application/json", overloaded_body, 0},
                                   {"200 OK", SSE, answer_stream, 0}};
    const reply bad_request_replies[] = {{"400 Bad Request", "application/json", bad_request_body, 0}};
    const reply error_json_replies[] = {
        {"429 Too Many Requests", JSON_WITH_RETRY_AFTER, rate_limited_body, 0},
        {"400 Bad Request", "application/json", prompt_too_long_body, 0},
        {"529 Site Overloaded", JSON_WITH_RETRY_AFTER, overloaded_body, 0},
        {"503 Service Unavailable", JSON_WITH_RETRY_AFTER, unavailable_body, 0}};
    const reply timeout_replies[] = {{NULL, NULL, NULL, 0}};
    /* Cut in the middle of the tool input: after the text block. */
    const char *tool_input = strstr(fixture, "\"partial_json\":\"on");
    size_t cut_at = tool_input != NULL ? (size_t)(tool_input - fixture) : fixture_len / 2;
    const reply cut_replies[] = {{"200 OK", SSE, fixture, cut_at}};
    const reply held_replies[] = {{NULL, NULL, NULL, 0}, {NULL, NULL, NULL, 0}, {NULL, NULL, NULL, 0}};
    const reply create_replies[] = {{"200 OK", "application/json", answer_message, 0}};
    const reply fork_replies[] = {{NULL, NULL, NULL, 0}, {NULL, NULL, NULL, 0}};

    /* The servers are forked before the library starts any thread. */
    server recorded_server = start_server(recorded_replies, 1);
    server chat_server = start_server(chat_replies, 1);
    server retry_server = start_server(retry_replies, 2);
    server unnamed_server = start_server(unnamed_replies, 2);
    server large_server = start_server(large_replies, 3);
    server bad_request_server = start_server(bad_request_replies, 1);
    server error_json_server = start_server(error_json_replies, 4);
    server timeout_server = start_server(timeout_replies, 1);
    server cut_server = start_server(cut_replies, 1);
    server held_server = start_server(held_replies, 3);
    server create_server = start_server(create_replies, 1);
    server fork_server = start_server(fork_replies, 2);
    server getters_server = start_server(chat_replies, 1);
    const reply concurrent_replies[] = {{NULL, NULL, NULL, 0}};
    server concurrent_server = start_server(concurrent_replies, 1);

    recorded_stream(&recorded_server, fixture, fixture_len);
    recorded_chat_stream(&chat_server, chat_name, chat, chat_len);
    retried(&retry_server);
    unnamed_events(&unnamed_server);
    large_requests(&large_server);
    bad_request(&bad_request_server);
    error_json(&error_json_server);
    timed_out(&timeout_server);
    cut(&cut_server);
    cancellation(&held_server);
    create(&create_server);
    misuse();
    forked_child(&fork_server);
    getters(&getters_server);
    concurrent_readers(&concurrent_server);
    free(fixture);
    free(chat);
    return check_summary("test_client");
}
