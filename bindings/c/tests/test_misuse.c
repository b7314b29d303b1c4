/*
 * The C API used carelessly: executors run or freed from inside tool callbacks, calls completed
 * after their run returned (or after the executor is gone), absurd option values, malformed
 * tool_use batches and replies, hostile token-estimation inputs, NUL bytes echoed into error
 * messages, and decoders and parsers at the edges of their contract. Each must end in a status
 * and a message, never a crash, a panic or a leak.
 *
 * Misuse that the header declares undefined (completing a call twice, using a view after the
 * next call on its handle, lengths longer than the buffer) is not exercised: no library can
 * detect it.
 *
 * Usage: test_misuse
 */
#include <pthread.h>
#include <stdint.h>

#include "check.h"

/* ---- tools ---- */

/* "echo": completes inline with its input JSON. */
static void echo_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    CHECK_OK(fl_tool_complete(call, invocation->input_json, invocation->input_json_len, false));
}

/* "inner": runs another executor (userdata) from inside its callback, as a sub-agent tool might.
 * The callback's thread is driving the outer run, so the inner run must be refused cleanly
 * (not FL_STATUS_PANIC), and the outer call still completes. */
static fl_status inner_status = FL_STATUS_OK;
static char inner_error[512];

static void inner_run_tool(void *userdata, const fl_tool_invocation *invocation,
                           fl_tool_call *call) {
    (void)invocation;
    fl_executor *inner = userdata;
    const char *calls = "[{\"id\":\"i\",\"name\":\"echo\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    inner_status = fl_executor_run(inner, calls, strlen(calls), NULL, &results, &len);
    snprintf(inner_error, sizeof inner_error, "%s", last_error());
    CHECK_OK(fl_tool_complete(call, "outer done", 10, false));
}

static void check_run_of_another_executor_inside_a_tool(void) {
    fl_executor *inner = NULL, *outer = NULL;
    CHECK_OK(fl_executor_new(NULL, &inner));
    CHECK_OK(fl_executor_add_tool(inner, "echo", 4, NULL, echo_tool, NULL));
    CHECK_OK(fl_executor_new(NULL, &outer));
    CHECK_OK(fl_executor_add_tool(outer, "sub", 3, NULL, inner_run_tool, inner));
    const char *calls = "[{\"id\":\"o\",\"name\":\"sub\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(outer, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"outer done\",\"is_error\":false") != NULL);
    CHECK(inner_status == FL_STATUS_INVALID_STATE);
    CHECK(strstr(inner_error, "worker thread") != NULL);
    if (inner_status != FL_STATUS_INVALID_STATE) {
        fprintf(stderr, "    inner run: status %d, %s\n", (int)inner_status, inner_error);
    }
    /* The refused inner executor is unharmed: it runs normally from a plain thread. */
    const char *inner_calls = "[{\"id\":\"i\",\"name\":\"echo\",\"input\":{\"k\":1}}]";
    CHECK_OK(fl_executor_run(inner, inner_calls, strlen(inner_calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "{\\\"k\\\":1}") != NULL);
    fl_executor_free(outer);
    fl_executor_free(inner);
}

/* "self_free": frees its own executor from inside its callback, which must do nothing (the run
 * is using it) instead of pulling the runtime out from under the run. */
static char free_error[512];

static void self_free_tool(void *userdata, const fl_tool_invocation *invocation,
                           fl_tool_call *call) {
    (void)invocation;
    fl_executor_free(*(fl_executor **)userdata);
    snprintf(free_error, sizeof free_error, "%s", last_error());
    CHECK_OK(fl_tool_complete(call, "still here", 10, false));
}

static void check_free_inside_a_tool_is_refused(void) {
    static fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "self_free", 9, NULL, self_free_tool, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "echo", 4, NULL, echo_tool, NULL));
    const char *calls = "[{\"id\":\"f\",\"name\":\"self_free\",\"input\":{}},"
                        "{\"id\":\"e\",\"name\":\"echo\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"still here\"") != NULL);
    CHECK(results != NULL && strstr(results, "\"tool_use_id\":\"e\",\"content\":\"{}\"") != NULL);
    CHECK(strstr(free_error, "in progress") != NULL);
    /* Once the run returned, the executor is freed for real (valgrind checks for the leak). */
    fl_executor_free(executor);
}

/* "make_and_free": creates, uses from a worker thread, and frees other executors from inside
 * its callback (on the thread driving the outer run). Only running an executor there is
 * refused; creating and freeing one are ordinary calls. */
static char make_and_free_error[512];
static fl_executor *idle_executor = NULL;

static void *run_inner(void *arg) {
    fl_executor *inner = arg;
    const char *calls = "[{\"id\":\"w\",\"name\":\"echo\",\"input\":{\"w\":1}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(inner, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "{\\\"w\\\":1}") != NULL);
    return NULL;
}

static void make_and_free_tool(void *userdata, const fl_tool_invocation *invocation,
                               fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    /* A known last error, to see whether the frees below record a new one. */
    CHECK_STATUS(fl_executor_new(NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    fl_executor *inner = NULL;
    CHECK_OK(fl_executor_new(NULL, &inner));
    CHECK_OK(fl_executor_add_tool(inner, "echo", 4, NULL, echo_tool, NULL));
    pthread_t worker;
    CHECK(pthread_create(&worker, NULL, run_inner, inner) == 0);
    CHECK(pthread_join(worker, NULL) == 0);
    fl_executor_free(inner);
    fl_executor_free(idle_executor); /* created (and run) before the outer run */
    idle_executor = NULL;
    snprintf(make_and_free_error, sizeof make_and_free_error, "%s", last_error());
    CHECK_OK(fl_tool_complete(call, "made and freed", 14, false));
}

static void check_free_of_another_executor_inside_a_tool(void) {
    CHECK_OK(fl_executor_new(NULL, &idle_executor));
    CHECK_OK(fl_executor_add_tool(idle_executor, "echo", 4, NULL, echo_tool, NULL));
    const char *results = NULL;
    size_t len = 0;
    const char *echo_call = "[{\"id\":\"i\",\"name\":\"echo\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(idle_executor, echo_call, strlen(echo_call), NULL, &results, &len));

    fl_executor *outer = NULL;
    CHECK_OK(fl_executor_new(NULL, &outer));
    CHECK_OK(fl_executor_add_tool(outer, "make_and_free", 13, NULL, make_and_free_tool, NULL));
    const char *calls = "[{\"id\":\"m\",\"name\":\"make_and_free\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(outer, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"made and freed\"") != NULL);
    /* The frees recorded nothing: no panic was caught inside them. */
    CHECK(strstr(make_and_free_error, "argument `out` must not be NULL") != NULL);
    fl_executor_free(outer);
}

/* "keep": keeps its call for later (never completes during the run). */
static fl_tool_call *kept[4];
static int kept_count = 0;

static void keep_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    if (kept_count < 4) {
        kept[kept_count++] = call;
    } else {
        CHECK_OK(fl_tool_complete(call, "no room", 7, true));
    }
}

/* "cancel_twice": cancels the run's token twice from inside the run, then completes. */
static fl_cancel_token *run_token = NULL;

static void cancel_twice_tool(void *userdata, const fl_tool_invocation *invocation,
                              fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    CHECK_OK(fl_cancel_token_cancel(run_token));
    CHECK_OK(fl_cancel_token_cancel(run_token));
    bool cancelled = false;
    CHECK_OK(fl_tool_call_cancelled(call, &cancelled));
    CHECK(cancelled);
    CHECK_OK(fl_tool_complete(call, "cancelled myself", 16, false));
}

/* "free_token": frees the run's token from inside the run, then completes. */
static void free_token_tool(void *userdata, const fl_tool_invocation *invocation,
                            fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    fl_cancel_token_free(run_token);
    run_token = NULL;
    CHECK_OK(fl_tool_complete(call, "token freed", 11, false));
}

/* The tools of check_late_completions, on `executor`. */
static void add_late_completion_tools(fl_executor *executor) {
    CHECK_OK(fl_executor_add_tool(executor, "keep", 4, NULL, keep_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "cancel_twice", 12, NULL, cancel_twice_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "free_token", 10, NULL, free_token_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "echo", 4, NULL, echo_tool, NULL));
}

/* Calls completed after their run gave up on them, and after their executor was freed: the
 * completions (and progress reports) are accepted and ignored; the handles report cancellation
 * meanwhile. */
static void check_late_completions(void) {
    fl_executor_options options = fl_executor_options_default();
    options.default_timeout_ms = 20;
    options.cleanup_grace_ms = 0;
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&options, &executor));
    add_late_completion_tools(executor);
    const char *calls = "[{\"id\":\"k1\",\"name\":\"keep\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "timed out") != NULL &&
          strstr(results, "\"is_error\":true") != NULL);
    bool cancelled = false;
    CHECK(kept_count == 1);
    CHECK_OK(fl_tool_call_cancelled(kept[0], &cancelled));
    CHECK(cancelled);
    /* Progress nobody listens to (a batch run, and over): accepted and dropped. */
    CHECK_OK(fl_tool_call_progress(kept[0], "{\"late\":true}", 13));
    CHECK_OK(fl_tool_complete(kept[0], "too late", 8, false));
    /* The late reply did not change the stored results. */
    CHECK(results != NULL && strstr(results, "too late") == NULL);

    /* A run cancelled from inside: the queued call never starts, the token may be cancelled
     * again, and the executor stays usable. On an executor with the default grace and no
     * timeout: with no grace, the run may produce the cancelling call's result before the call
     * completes (a race its own reply loses now and then, under valgrind), and a 20 ms timeout
     * can expire under valgrind before the call completes. */
    fl_executor *patient = NULL;
    CHECK_OK(fl_executor_new(NULL, &patient));
    add_late_completion_tools(patient);
    CHECK_OK(fl_cancel_token_new(&run_token));
    const char *cancelling = "[{\"id\":\"c\",\"name\":\"cancel_twice\",\"input\":{}},"
                             "{\"id\":\"k2\",\"name\":\"keep\",\"input\":{}}]";
    CHECK_STATUS(fl_executor_run(patient, cancelling, strlen(cancelling), run_token, &results, &len),
                 FL_STATUS_CANCELLED);
    CHECK(results != NULL && strstr(results, "\"content\":\"cancelled myself\"") != NULL);
    CHECK(results != NULL && strstr(results, "\"tool_use_id\":\"k2\"") != NULL);
    CHECK(kept_count == 1);
    CHECK_OK(fl_cancel_token_cancel(run_token));
    fl_cancel_token_free(run_token);

    /* A token cancelled before the run: no tool is called at all, every call gets its error
     * result. Repeated, since a race between the run's first step and the cancellation would
     * only show sometimes. */
    fl_cancel_token *early = NULL;
    CHECK_OK(fl_cancel_token_new(&early));
    CHECK_OK(fl_cancel_token_cancel(early));
    const char *two = "[{\"id\":\"e1\",\"name\":\"keep\",\"input\":{}},"
                      "{\"id\":\"e2\",\"name\":\"keep\",\"input\":{}}]";
    for (int i = 0; i < 50; i++) {
        results = NULL;
        CHECK_STATUS(fl_executor_run(executor, two, strlen(two), early, &results, &len),
                     FL_STATUS_CANCELLED);
        CHECK(results != NULL && strstr(results, "\"is_error\":false") == NULL &&
              strstr(results, "\"tool_use_id\":\"e2\"") != NULL);
    }
    CHECK(kept_count == 1);
    fl_cancel_token_free(early);

    /* The run's token freed by a tool of that run: the run goes on to the end, normally. */
    CHECK_OK(fl_cancel_token_new(&run_token));
    const char *freeing = "[{\"id\":\"t\",\"name\":\"free_token\",\"input\":{}},"
                          "{\"id\":\"e\",\"name\":\"echo\",\"input\":{\"after\":1}}]";
    CHECK_OK(fl_executor_run(patient, freeing, strlen(freeing), run_token, &results, &len));
    CHECK(run_token == NULL);
    CHECK(results != NULL && strstr(results, "\"content\":\"token freed\"") != NULL);
    CHECK(results != NULL && strstr(results, "{\\\"after\\\":1}") != NULL);
    fl_executor_free(patient);

    /* A call kept past the executor's lifetime. */
    const char *kept_call = "[{\"id\":\"k3\",\"name\":\"keep\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(executor, kept_call, strlen(kept_call), NULL, &results, &len));
    CHECK(kept_count == 2);
    fl_executor_free(executor);
    cancelled = false;
    CHECK_OK(fl_tool_call_cancelled(kept[1], &cancelled));
    CHECK(cancelled);
    CHECK_OK(fl_tool_call_progress(kept[1], "\"after free\"", 12));
    CHECK_OK(fl_tool_complete_json(kept[1], "\"after free\"", 12, false));
}

/* Option values at the edges of their types: accepted, and runs still work. */
static void check_extreme_options(void) {
    size_t concurrency[] = {0, SIZE_MAX};
    for (size_t i = 0; i < 2; i++) {
        fl_executor_options options = fl_executor_options_default();
        options.max_concurrency = concurrency[i];
        options.default_timeout_ms = UINT64_MAX;
        options.cleanup_grace_ms = UINT64_MAX;
        fl_executor *executor = NULL;
        CHECK_OK(fl_executor_new(&options, &executor));
        fl_tool_options tool = fl_tool_options_default();
        tool.timeout_ms = UINT64_MAX;
        tool.concurrency_safe = true;
        CHECK_OK(fl_executor_add_tool(executor, "echo", 4, &tool, echo_tool, NULL));
        const char *calls = "[{\"id\":\"a\",\"name\":\"echo\",\"input\":{\"n\":1}},"
                            "{\"id\":\"b\",\"name\":\"echo\",\"input\":{\"n\":2}}]";
        const char *results = NULL;
        size_t len = 0;
        CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
        CHECK(results != NULL && strstr(results, "\"is_error\":true") == NULL);
        CHECK(results != NULL && strstr(results, "{\\\"n\\\":2}") != NULL);
        fl_executor_free(executor);
    }
}

/* Tool names and tool_use batches of every wrong shape. */
static void bad_json_reply_tool(void *userdata, const fl_tool_invocation *invocation,
                                fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    /* 100,000 nested arrays: refused by the parser's depth limit, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    CHECK_STATUS(fl_tool_complete_json(call, deep, depth, false), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "recursion limit") != NULL);
    free(deep);
}

static void check_bad_batches(void) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "echo", 4, NULL, echo_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "deep", 4, NULL, bad_json_reply_tool, NULL));
    CHECK_STATUS(fl_executor_add_tool(executor, "", 0, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_executor_add_tool(executor, NULL, 0, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_executor_add_tool(executor, "\xc3", 1, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_UTF8);

    const char *results = NULL;
    size_t len = 0;
    /* Not a batch at all. */
    const char *refused[] = {
        "",
        "{}",
        "[1]",
        "[{\"name\":\"echo\",\"input\":{}}]",          /* no id */
        "[{\"id\":5,\"name\":\"echo\",\"input\":{}}]", /* id not a string */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        results = NULL;
        CHECK_STATUS(fl_executor_run(executor, refused[i], strlen(refused[i]), NULL, &results, &len),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(results == NULL);
        CHECK(strstr(last_error(), "tool_uses_json") != NULL);
    }
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    CHECK_STATUS(fl_executor_run(executor, deep, depth, NULL, &results, &len),
                 FL_STATUS_INVALID_ARGUMENT);
    free(deep);

    /* A call without an input runs its tool with {}, the core's rule (as in Python and Node). */
    const char *no_input = "[{\"id\":\"a\",\"name\":\"echo\"}]";
    CHECK_OK(fl_executor_run(executor, no_input, strlen(no_input), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"tool_use_id\":\"a\",\"content\":\"{}\",\"is_error\":false") != NULL);

    /* A batch of odd but well-formed calls: one error result each, in order, for every call. */
    const char *odd = "[{\"id\":\"d\",\"name\":\"echo\",\"input\":{}},"
                      "{\"id\":\"d\",\"name\":\"echo\",\"input\":{}}," /* duplicate id */
                      "{\"id\":\"arr\",\"name\":\"echo\",\"input\":[1]},"
                      "{\"id\":\"null\",\"name\":\"echo\",\"input\":null},"
                      "{\"id\":\"\",\"name\":\"\",\"input\":{}},"
                      "{\"id\":\"u\",\"name\":\"nope\",\"input\":{}},"
                      "{\"id\":\"deep\",\"name\":\"deep\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(executor, odd, strlen(odd), NULL, &results, &len));
    if (results != NULL) {
        int count = 0;
        for (const char *at = results; (at = strstr(at, "\"type\":\"tool_result\"")) != NULL; at++) {
            count++;
        }
        CHECK(count == 7);
        CHECK(strstr(results, "expected object, got array") != NULL);
        CHECK(strstr(results, "expected object, got null") != NULL);
        CHECK(strstr(results, "Unknown tool ''") != NULL);
        CHECK(strstr(results, "Unknown tool 'nope'") != NULL);
        CHECK(strstr(results, "recursion limit") != NULL);
    }
    fl_executor_free(executor);
}

/* Token estimation of hostile requests. */
static void check_hostile_requests(void) {
    fl_request_estimate parts;
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    CHECK_STATUS(fl_tokens_estimate_request(deep, depth, NULL, 0, &parts), FL_STATUS_INVALID_ARGUMENT);
    memset(deep, '{', depth);
    CHECK_STATUS(fl_tokens_estimate_request(deep, depth, NULL, 0, &parts), FL_STATUS_INVALID_ARGUMENT);
    free(deep);

    /* Absurd image dimensions cost a bounded amount, never an overflow. */
    const char *families[] = {"claude", "o200k"};
    const char *images[] = {
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"width\":18446744073709551615,\"height\":-1}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"width\":4294967295,\"height\":4294967295}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"width\":1,\"height\":4294967295}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"width\":0,\"height\":0}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
        "\"width\":1.5e308,\"height\":\"NaN\"}]}]}",
    };
    for (size_t f = 0; f < 2; f++) {
        for (size_t i = 0; i < sizeof images / sizeof images[0]; i++) {
            memset(&parts, 0, sizeof parts);
            CHECK_OK(fl_tokens_estimate_request(images[i], strlen(images[i]), families[f],
                                                strlen(families[f]), &parts));
            CHECK(parts.messages > 0 && parts.messages < 10000);
            CHECK(parts.total == parts.system + parts.tools + parts.messages + parts.overhead);
        }
    }
    /* Family names are exact: no case folding, no trailing NUL. */
    CHECK_STATUS(fl_tokens_estimate_request("{}", 2, "CLAUDE", 6, &parts), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tokens_estimate_request("{}", 2, "claude\0", 7, &parts),
                 FL_STATUS_INVALID_ARGUMENT);
}

/* A NUL byte echoed from an argument into the last error is written out, not a terminator. */
static void check_nul_in_error_messages(void) {
    fl_decoder *decoder = NULL;
    CHECK_STATUS(fl_decoder_new("anthropic\0x", 11, &decoder), FL_STATUS_INVALID_ARGUMENT);
    CHECK(decoder == NULL);
    size_t written = 0;
    CHECK_STATUS(fl_last_error_message(NULL, 0, &written), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(strlen(last_error()) == written);
    CHECK(strstr(last_error(), "anthropic\\0x") != NULL);
    uint64_t tokens = 0;
    CHECK_STATUS(fl_tokens_estimate_text("a", 1, "o200k\0", 6, &tokens), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_last_error_message(NULL, 0, &written), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(strlen(last_error()) == written);

    /* Tiny buffers for the messages: always NUL-terminated. */
    char one[1] = {'x'};
    CHECK_STATUS(fl_last_error_message(one, 1, &written), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(one[0] == '\0');
    one[0] = 'x';
    CHECK_STATUS(fl_status_message(INT32_MIN, one, 1, &written), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(one[0] == '\0' && written == strlen("unknown status"));
    char message[64];
    CHECK_OK(fl_status_message(INT32_MAX, message, sizeof message, &written));
    CHECK(strcmp(message, "unknown status") == 0);
    CHECK_OK(fl_status_message(FL_STATUS_TIMEOUT + 1, message, sizeof message, &written));
    CHECK(strcmp(message, "unknown status") == 0);
}

/* Decoders and parsers at the edges of their contract. */
static void check_stream_edges(void) {
    fl_decoder *decoder = NULL;
    CHECK_STATUS(fl_decoder_new("", 0, &decoder), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_decoder_new(NULL, 0, &decoder), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_decoder_new("Anthropic", 9, &decoder), FL_STATUS_INVALID_ARGUMENT);
    CHECK(decoder == NULL);

    /* Finished before any byte: truncated, and the snapshot is still valid JSON (null). */
    const char *json = NULL;
    size_t len = 0;
    bool has_event = true;
    CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
    CHECK_STATUS(fl_decoder_finish(decoder, &json, &len), FL_STATUS_TRUNCATED);
    CHECK(json != NULL && strcmp(json, "null") == 0);
    CHECK_OK(fl_decoder_message(decoder, &json, &len));
    CHECK(len == 4 && strcmp(json, "null") == 0);
    CHECK_OK(fl_decoder_next_event(decoder, &json, &len, &has_event));
    CHECK(!has_event && json == NULL);
    CHECK_STATUS(fl_decoder_feed(decoder, NULL, 0), FL_STATUS_INVALID_STATE);
    CHECK_STATUS(fl_decoder_feed(decoder, NULL, SIZE_MAX), FL_STATUS_NULL_ARGUMENT);
    fl_decoder_free(decoder);

    /* Absurd indices are protocol errors, not allocations. */
    CHECK_OK(fl_decoder_new("openai-chat", 11, &decoder));
    const char *chunk =
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
        "\"choices\":[{\"index\":18446744073709551615,\"delta\":{\"content\":\"x\"},"
        "\"finish_reason\":null}]}\n\n";
    CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)chunk, strlen(chunk)),
                 FL_STATUS_PROTOCOL_ERROR);
    CHECK(strstr(last_error(), "index") != NULL);
    fl_decoder_free(decoder);

    /* Parsers: the largest limit is no limit; the smallest drops every event. */
    fl_sse_parser *parser = NULL;
    fl_sse_item item;
    const char *stream = "event: \xff\xfe\ndata: a\xc3\n\nretry: 99999999999999999999999\n\n";
    CHECK_OK(fl_sse_parser_new_with_max_event_bytes(SIZE_MAX, &parser));
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)stream, strlen(stream)));
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_EVENT);
    /* Invalid UTF-8 becomes U+FFFD (EF BF BD), in the type as in the data. */
    CHECK(text_equals(item.event.event_type, item.event.event_type_len, "\xef\xbf\xbd\xef\xbf\xbd"));
    CHECK(text_equals(item.event.data, item.event.data_len, "a\xef\xbf\xbd"));
    /* A retry beyond 64 bits saturates. */
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_RETRY && item.retry_ms == UINT64_MAX);
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_NONE);
    bool discarded = true;
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK_OK(fl_sse_parser_finish(parser, &discarded));
    CHECK(!discarded);
    fl_sse_parser_free(parser);

    CHECK_OK(fl_sse_parser_new_with_max_event_bytes(1, &parser));
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)"data: x\n\ndata:\n\n", 15));
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_NONE);
    uint64_t dropped = 0;
    CHECK_OK(fl_sse_parser_dropped_events(parser, &dropped));
    CHECK(dropped == 2);
    fl_sse_parser_free(parser);
}

/* A length no object can have (past PTRDIFF_MAX) is refused as an invalid argument before the
 * pointer is touched: it is always a caller's bug (a negative length cast to size_t, an
 * underflowed subtraction), and the slice it would make does not exist. */
static void check_impossible_lengths(void) {
    size_t huge = (size_t)PTRDIFF_MAX + 1;
    size_t lengths[] = {huge, SIZE_MAX};
    for (size_t i = 0; i < 2; i++) {
        size_t len = lengths[i];
        uint64_t tokens = 7;
        CHECK_STATUS(fl_tokens_estimate_text("ab", len, NULL, 0, &tokens), FL_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "`text`") != NULL);
        CHECK(tokens == 7);
        CHECK_STATUS(fl_tokens_estimate_text("ab", 2, "claude", len, &tokens),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "`tokenizer`") != NULL);
        fl_decoder *decoder = NULL;
        CHECK_STATUS(fl_decoder_new("anthropic", len, &decoder), FL_STATUS_INVALID_ARGUMENT);
        CHECK(decoder == NULL);
        CHECK_OK(fl_decoder_new("anthropic", 9, &decoder));
        CHECK_STATUS(fl_decoder_feed(decoder, (const uint8_t *)"x", len), FL_STATUS_INVALID_ARGUMENT);
        /* Nothing was fed: the decoder still works. */
        CHECK_OK(fl_decoder_feed(decoder, (const uint8_t *)"\n", 1));
        fl_decoder_free(decoder);
        fl_sse_parser *parser = NULL;
        CHECK_OK(fl_sse_parser_new(&parser));
        CHECK_STATUS(fl_sse_parser_feed(parser, (const uint8_t *)"x", len), FL_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "`data`") != NULL);
        fl_sse_parser_free(parser);
    }
}

/* "huge_reply": completes with an impossible length (a negative length cast to size_t). */
static void huge_reply_tool(void *userdata, const fl_tool_invocation *invocation,
                            fl_tool_call *call) {
    (void)invocation;
    if (userdata != NULL) {
        CHECK_STATUS(fl_tool_complete_json(call, "\"ok\"", SIZE_MAX, false), FL_STATUS_INVALID_ARGUMENT);
    } else {
        CHECK_STATUS(fl_tool_complete(call, "ok", (size_t)PTRDIFF_MAX + 1, false),
                     FL_STATUS_INVALID_ARGUMENT);
    }
    CHECK(strstr(last_error(), "length") != NULL);
}

/* The call is still completed, with an error result saying why, and the run goes on. */
static void check_impossible_reply_lengths(void) {
    static int json = 1;
    void *modes[] = {NULL, &json};
    for (size_t i = 0; i < 2; i++) {
        fl_executor *executor = NULL;
        CHECK_OK(fl_executor_new(NULL, &executor));
        CHECK_OK(fl_executor_add_tool(executor, "huge", 4, NULL, huge_reply_tool, modes[i]));
        const char *calls = "[{\"id\":\"h\",\"name\":\"huge\",\"input\":{}}]";
        const char *results = NULL;
        size_t len = 0;
        CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
        CHECK(results != NULL && strstr(results, "\"is_error\":true") != NULL);
        CHECK(results != NULL && strstr(results, "refused") != NULL);
        fl_executor_free(executor);
    }
}

int main(void) {
    check_impossible_lengths();
    check_impossible_reply_lengths();
    check_run_of_another_executor_inside_a_tool();
    check_free_inside_a_tool_is_refused();
    check_free_of_another_executor_inside_a_tool();
    check_late_completions();
    check_extreme_options();
    check_bad_batches();
    check_hostile_requests();
    check_nul_in_error_messages();
    check_stream_edges();
    return check_summary("test_misuse");
}
