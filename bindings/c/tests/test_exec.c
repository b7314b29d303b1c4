/*
 * The tool executor driven by C tools: parallel calls completed from worker threads, results in
 * request order, an unknown tool, a timeout, a cancellation seen by running tools, the
 * argument checks, and a predicate deciding the concurrency of a tool's calls per input.
 *
 * Usage: test_exec
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "check.h"

#include "workers.h"

/* ---- shared state of the tools ---- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int started;      /* calls started */
    int running;      /* calls running now */
    int max_running;  /* the most that ran at once */
    int saw_cancel;   /* calls that observed fl_tool_call_cancelled */
    int exclusive_calls;
} tool_state;

static tool_state state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0};

static void reset_state(void) {
    pthread_mutex_lock(&state.lock);
    state.started = state.running = state.max_running = state.saw_cancel = 0;
    state.exclusive_calls = 0;
    pthread_mutex_unlock(&state.lock);
}

/* Records a started call; returns the number started so far. */
static int call_started(void) {
    pthread_mutex_lock(&state.lock);
    int started = ++state.started;
    state.running++;
    if (state.running > state.max_running) {
        state.max_running = state.running;
    }
    pthread_cond_broadcast(&state.changed);
    pthread_mutex_unlock(&state.lock);
    return started;
}

static void call_ended(void) {
    pthread_mutex_lock(&state.lock);
    state.running--;
    pthread_cond_broadcast(&state.changed);
    pthread_mutex_unlock(&state.lock);
}

/* Waits until at least `count` calls started (false after 10 s: they did not run in parallel). */
static bool wait_for_started(int count) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&state.lock);
    int result = 0;
    while (state.started < count && result == 0) {
        result = pthread_cond_timedwait(&state.changed, &state.lock, &deadline);
    }
    bool reached = state.started >= count;
    pthread_mutex_unlock(&state.lock);
    return reached;
}

/* ---- tools ---- */

typedef struct {
    fl_tool_call *call;
    char id[64];
} work;

static work *new_work(const fl_tool_invocation *invocation, fl_tool_call *call) {
    work *job = calloc(1, sizeof *job);
    job->call = call;
    size_t n = invocation->tool_use_id_len < sizeof job->id - 1 ? invocation->tool_use_id_len
                                                                : sizeof job->id - 1;
    memcpy(job->id, invocation->tool_use_id, n);
    return job;
}

/* "pair": two calls must run at the same time; each completes from its own thread once both
 * started. */
static void *pair_worker(void *arg) {
    work *job = arg;
    bool parallel = wait_for_started(2);
    char reply[128];
    snprintf(reply, sizeof reply, "pair %s %s", job->id, parallel ? "parallel" : "alone");
    call_ended();
    CHECK_OK(fl_tool_complete(job->call, reply, strlen(reply), !parallel));
    free(job);
    return NULL;
}

static void pair_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    CHECK(userdata == &state);
    CHECK(text_equals(invocation->tool_name, invocation->tool_name_len, "pair"));
    call_started();
    start_worker(pair_worker, new_work(invocation, call));
}

/* "echo": exclusive; completes inline with its input JSON. */
static void echo_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    pthread_mutex_lock(&state.lock);
    state.exclusive_calls++;
    bool alone = state.running == 0;
    pthread_mutex_unlock(&state.lock);
    CHECK(alone);
    CHECK_OK(fl_tool_complete(call, invocation->input_json, invocation->input_json_len, false));
}

/* "list": answers with an array of plain values, inline: not content blocks, so the result
 * carries the array's JSON text (the providers refuse anything but blocks as content). */
static void list_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    const char *values = "[1,\"two\",null]";
    CHECK_OK(fl_tool_complete_json(call, values, strlen(values), false));
}

/* "blocks": answers with content blocks, inline. */
static void blocks_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    const char *blocks = "[{\"type\":\"text\",\"text\":\"block one\"}]";
    CHECK_OK(fl_tool_complete_json(call, blocks, strlen(blocks), false));
}

/* "slow": runs on a worker thread until cancelled (at most 10 s), then completes. */
static void *slow_worker(void *arg) {
    work *job = arg;
    bool cancelled = false;
    for (int i = 0; i < 10000 && !cancelled; i++) {
        CHECK_OK(fl_tool_call_cancelled(job->call, &cancelled));
        if (!cancelled) {
            sleep_ms(1);
        }
    }
    if (cancelled) {
        pthread_mutex_lock(&state.lock);
        state.saw_cancel++;
        pthread_mutex_unlock(&state.lock);
    }
    call_ended();
    const char *reply = cancelled ? "stopped early" : "never cancelled";
    CHECK_OK(fl_tool_complete(job->call, reply, strlen(reply), true));
    free(job);
    return NULL;
}

static void slow_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    call_started();
    start_worker(slow_worker, new_work(invocation, call));
}

/* "nested": tries to run the executor from inside a tool callback, which must be refused. */
static void nested_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    fl_executor *executor = *(fl_executor **)userdata;
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_executor_run(executor, "[]", 2, NULL, &results, &len), FL_STATUS_INVALID_STATE);
    CHECK_OK(fl_tool_complete(call, "refused", 7, false));
}

static fl_executor *the_executor = NULL;

/* ---- helpers ---- */

static fl_executor *new_executor(void) {
    fl_executor_options options = fl_executor_options_default();
    CHECK(options.max_concurrency == 10 && options.default_timeout_ms == 0);
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&options, &executor));
    fl_tool_options safe = fl_tool_options_default();
    safe.concurrency_safe = true;
    fl_tool_options timed = safe;
    timed.timeout_ms = 50;
    CHECK_OK(fl_executor_add_tool(executor, "pair", 4, &safe, pair_tool, &state));
    CHECK_OK(fl_executor_add_tool(executor, "echo", 4, NULL, echo_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "blocks", 6, &safe, blocks_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "list", 4, &safe, list_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "slow", 4, &safe, slow_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "timed", 5, &timed, slow_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "nested", 6, NULL, nested_tool, &the_executor));
    CHECK_STATUS(fl_executor_add_tool(executor, "echo", 4, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_ARGUMENT);
    return executor;
}

/* Whether the results contain the `needles` in this order. */
static bool in_order(const char *text, const char *const *needles, size_t count) {
    const char *at = text;
    for (size_t i = 0; i < count; i++) {
        const char *found = strstr(at, needles[i]);
        if (found == NULL) {
            fprintf(stderr, "    missing or out of order: %s\n", needles[i]);
            return false;
        }
        at = found + strlen(needles[i]);
    }
    return true;
}

/* ---- scenarios ---- */

static void check_parallel_run_in_request_order(fl_executor *executor) {
    reset_state();
    const char *calls =
        "[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"pair\",\"input\":{}},"
        "{\"id\":\"b\",\"name\":\"pair\",\"input\":{}},"
        "{\"id\":\"c\",\"name\":\"echo\",\"input\":{\"say\":\"hi\"}},"
        "{\"id\":\"d\",\"name\":\"blocks\",\"input\":{}},"
        "{\"id\":\"e\",\"name\":\"nope\",\"input\":{}},"
        "{\"id\":\"f\",\"name\":\"list\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    join_workers();
    CHECK(results != NULL && strlen(results) == len);
    if (results == NULL) {
        return;
    }
    const char *order[] = {
        "{\"type\":\"tool_result\",\"tool_use_id\":\"a\",\"content\":\"pair a parallel\",\"is_error\":false}",
        "{\"type\":\"tool_result\",\"tool_use_id\":\"b\",\"content\":\"pair b parallel\",\"is_error\":false}",
        "{\"type\":\"tool_result\",\"tool_use_id\":\"c\",\"content\":\"{\\\"say\\\":\\\"hi\\\"}\",\"is_error\":false}",
        "{\"type\":\"tool_result\",\"tool_use_id\":\"d\",\"content\":[{\"type\":\"text\",\"text\":\"block one\"}],\"is_error\":false}",
        "{\"type\":\"tool_result\",\"tool_use_id\":\"e\",",
        "{\"type\":\"tool_result\",\"tool_use_id\":\"f\",\"content\":\"[1,\\\"two\\\",null]\",\"is_error\":false}",
    };
    CHECK(in_order(results, order, sizeof order / sizeof order[0]));
    CHECK(strstr(strstr(results, "\"tool_use_id\":\"e\""), "\"is_error\":true") != NULL);
    CHECK(state.max_running == 2);
    CHECK(state.exclusive_calls == 1);
    if (checks_failed) {
        fprintf(stderr, "    results: %s\n", results);
    }
}

static void *cancel_when_started(void *arg) {
    fl_cancel_token *token = arg;
    CHECK(wait_for_started(2));
    CHECK_OK(fl_cancel_token_cancel(token));
    return NULL;
}

static void check_cancellation(fl_executor *executor) {
    reset_state();
    fl_cancel_token *token = NULL;
    CHECK_OK(fl_cancel_token_new(&token));
    bool cancelled = true;
    CHECK_OK(fl_cancel_token_is_cancelled(token, &cancelled));
    CHECK(!cancelled);
    /* Two slow calls run together; the exclusive echo queued after them never starts. */
    const char *calls = "[{\"id\":\"s1\",\"name\":\"slow\",\"input\":{}},"
                        "{\"id\":\"s2\",\"name\":\"slow\",\"input\":{}},"
                        "{\"id\":\"x\",\"name\":\"echo\",\"input\":{}}]";
    pthread_t canceller;
    CHECK(pthread_create(&canceller, NULL, cancel_when_started, token) == 0);
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_executor_run(executor, calls, strlen(calls), token, &results, &len),
                 FL_STATUS_CANCELLED);
    pthread_join(canceller, NULL);
    join_workers();
    CHECK_OK(fl_cancel_token_is_cancelled(token, &cancelled));
    CHECK(cancelled);
    CHECK(state.saw_cancel == 2);
    CHECK(state.exclusive_calls == 0);
    if (results != NULL) {
        const char *order[] = {"\"tool_use_id\":\"s1\"", "\"is_error\":true",
                               "\"tool_use_id\":\"s2\"", "\"is_error\":true",
                               "\"tool_use_id\":\"x\"", "\"is_error\":true"};
        CHECK(in_order(results, order, sizeof order / sizeof order[0]));
        CHECK(strstr(results, "\"is_error\":false") == NULL);
    }
    /* The token stays cancelled: a later run under it starts no call. */
    reset_state();
    const char *echo_call = "[{\"id\":\"e\",\"name\":\"echo\",\"input\":{}}]";
    results = NULL;
    /* FL_STATUS_CANCELLED records its own message, as every non-OK status does: the last error
     * does not still describe an older, unrelated failure. */
    CHECK_STATUS(fl_decoder_new("bogus", 5, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_run(executor, echo_call, strlen(echo_call), token, &results, &len),
                 FL_STATUS_CANCELLED);
    CHECK(strstr(last_error(), "cancelled") != NULL);
    CHECK(results != NULL && strstr(results, "\"is_error\":true") != NULL);
    CHECK(results != NULL && strstr(results, "was not run") != NULL);
    fl_cancel_token_free(token);
}

static void check_timeout(fl_executor *executor) {
    reset_state();
    const char *calls = "[{\"id\":\"t\",\"name\":\"timed\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    join_workers();
    CHECK(state.saw_cancel == 1);
    CHECK(results != NULL && strstr(results, "\"is_error\":true") != NULL);
}

/* A tool that does its work in the callback and completes the call there (inline) is timed out
 * like one that answers from a worker: its answer comes when the callback returns, after its
 * limit. */
static void inline_slow_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    sleep_ms(120);
    CHECK_OK(fl_tool_complete(call, "finished late", 13, false));
}

static void check_inline_completion_past_its_timeout(void) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    fl_tool_options timed = fl_tool_options_default();
    timed.timeout_ms = 30;
    CHECK_OK(fl_executor_add_tool(executor, "inline", 6, &timed, inline_slow_tool, NULL));
    const char *calls = "[{\"id\":\"i\",\"name\":\"inline\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL &&
          strstr(results, "\"content\":\"Tool 'inline' timed out after 30ms\",\"is_error\":true") != NULL);
    fl_executor_free(executor);
}

static void check_nested_run_is_refused(fl_executor *executor) {
    const char *calls = "[{\"id\":\"n\",\"name\":\"nested\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"refused\",\"is_error\":false") != NULL);
}

/* A lone surrogate escape in a tool use's input (JSON text of a string cut inside an emoji)
 * reads as U+FFFD, as in Node and in the tracker's arguments: it was refused as "unexpected
 * end of hex escape". */
static void check_lone_surrogate_input_reads_as_replacement(fl_executor *executor) {
    const char *calls = "[{\"id\":\"s\",\"name\":\"echo\",\"input\":{\"s\":\"x\\ud83d\"}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "x\xef\xbf\xbd") != NULL);
    CHECK(strstr(results, "\"is_error\":false") != NULL);
}

static void check_arguments(fl_executor *executor) {
    const char *results = NULL;
    size_t len = 0;
    const char *calls = "[]";
    CHECK_STATUS(fl_executor_run(NULL, calls, 2, NULL, &results, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_run(executor, NULL, 2, NULL, &results, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_run(executor, calls, 2, NULL, NULL, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_run(executor, calls, 2, NULL, &results, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_run(executor, "[\xff]", 3, NULL, &results, &len),
                 FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_executor_run(executor, "{\"id\":1}", 8, NULL, &results, &len),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "tool_use") != NULL);
    CHECK_OK(fl_executor_run(executor, calls, 2, NULL, &results, &len));
    CHECK(len == 2 && strcmp(results, "[]") == 0);
    /* Tools are fixed once the executor has run. */
    CHECK_STATUS(fl_executor_add_tool(executor, "late", 4, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_STATE);
    CHECK_STATUS(fl_executor_add_tool(NULL, "x", 1, NULL, echo_tool, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_add_tool(executor, "x", 1, NULL, NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_new(NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_cancel_token_new(NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_cancel_token_cancel(NULL), FL_STATUS_NULL_ARGUMENT);
    bool flag = false;
    CHECK_STATUS(fl_cancel_token_is_cancelled(NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_tool_complete(NULL, "x", 1, false), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_tool_call_cancelled(NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    fl_executor_free(NULL);
    fl_cancel_token_free(NULL);
}

/* A tool whose reply is not UTF-8: the call completes with an error result saying so. */
static void bad_reply_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    CHECK_STATUS(fl_tool_complete(call, "bad \xff", 5, false), FL_STATUS_INVALID_UTF8);
}

static void check_invalid_reply(void) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "bad", 3, NULL, bad_reply_tool, NULL));
    const char *calls = "[{\"id\":\"z\",\"name\":\"bad\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "not valid UTF-8") != NULL);
    CHECK(results != NULL && strstr(results, "\"is_error\":true") != NULL);
    fl_executor_free(executor);
}

/* ---- "gate": a predicate deciding the concurrency per input ---- */

/* What the gate tool records (its callback and predicate run on the thread driving the turn). */
typedef struct {
    fl_tool_call *held[4]; /* calls started and not completed yet */
    int held_count;
    int held_at_start[4]; /* for each call started, how many were held then */
    int started;
    int decided;         /* the predicate's calls */
    bool nul_terminated; /* every input the predicate saw ended with a NUL */
} gate_state;

static gate_state gate;

/* Holds its call: the turn's driver completes the held calls once nothing else can happen. */
static void gate_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    gate_state *g = userdata;
    if (g->started < 4) g->held_at_start[g->started] = g->held_count;
    g->started++;
    if (g->held_count < 4) {
        g->held[g->held_count++] = call;
    } else {
        CHECK(!"more calls than submitted");
        CHECK_OK(fl_tool_complete(call, "extra", 5, true));
    }
}

/* Safe for {"mode":"read"}; anything else runs alone. */
static bool gate_safe(void *userdata, const char *input_json, size_t input_json_len) {
    gate_state *g = userdata;
    g->decided++;
    if (input_json[input_json_len] != '\0') g->nul_terminated = false;
    return text_equals(input_json, input_json_len, "{\"mode\":\"read\"}");
}

/* Two calls of "gate" with `input` in a streaming turn, the held calls completed only when the
 * turn can make no more progress at once (timeout 0 and nothing happened): so the second call
 * starts while the first is held exactly when admission lets them run together. Returns how
 * many calls were held when the second one started (1: they overlapped; 0: it waited). */
static int second_call_overlap(fl_executor *executor, const char *input) {
    memset(&gate, 0, sizeof gate);
    gate.nul_terminated = true;
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    for (int i = 0; i < 2; i++) {
        char call[128];
        snprintf(call, sizeof call, "{\"id\":\"g%d\",\"name\":\"gate\",\"input\":%s}", i, input);
        CHECK_OK(fl_turn_submit(turn, call, strlen(call)));
    }
    CHECK_OK(fl_turn_seal(turn));
    for (;;) {
        bool holding = gate.held_count > 0;
        fl_turn_event event;
        /* Without a held call, wait (a hang guard of 60 s); with one, take only what the turn
         * can do at once. */
        fl_status status = fl_turn_next_event(turn, holding ? 0 : 60000, &event);
        CHECK_OK(status);
        if (status != FL_STATUS_OK || event.kind == FL_TURN_EVENT_END) break;
        if (event.kind == FL_TURN_EVENT_NONE) {
            CHECK(holding); /* else: the hang guard expired */
            if (!holding) break;
            for (int i = 0; i < gate.held_count; i++) {
                CHECK_OK(fl_tool_complete(gate.held[i], "done", 4, false));
            }
            gate.held_count = 0;
        }
    }
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL &&
          strcmp(results, "[{\"type\":\"tool_result\",\"tool_use_id\":\"g0\",\"content\":\"done\","
                          "\"is_error\":false},{\"type\":\"tool_result\",\"tool_use_id\":\"g1\","
                          "\"content\":\"done\",\"is_error\":false}]") == 0);
    fl_turn_free(turn);
    CHECK(gate.started == 2 && gate.decided == 2 && gate.nul_terminated);
    return gate.held_at_start[1];
}

/* A C tool's predicate decides per input: two calls overlap for {"mode":"read"}, the second
 * waits for the first for {"mode":"write"}. */
static void check_concurrency_predicate(void) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    const char *tool = "{\"name\":\"gate\"}";
    CHECK_OK(fl_executor_add_tool_json_with_safety(executor, tool, strlen(tool), gate_tool,
                                                   gate_safe, &gate));
    /* The predicate replaces the `concurrency_safe` key; both functions are required. */
    const char *both = "{\"name\":\"other\",\"concurrency_safe\":true}";
    CHECK_STATUS(fl_executor_add_tool_json_with_safety(executor, both, strlen(both), gate_tool,
                                                       gate_safe, &gate),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "\"concurrency_safe\" is given") != NULL);
    const char *other = "{\"name\":\"other\"}";
    CHECK_STATUS(fl_executor_add_tool_json_with_safety(executor, other, strlen(other), gate_tool,
                                                       NULL, &gate),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_add_tool_json_with_safety(executor, other, strlen(other), NULL,
                                                       gate_safe, &gate),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK(second_call_overlap(executor, "{\"mode\":\"read\"}") == 1);
    CHECK(second_call_overlap(executor, "{\"mode\":\"write\"}") == 0);
    fl_executor_free(executor);
}

int main(void) {
    fl_executor *executor = new_executor();
    the_executor = executor;
    check_parallel_run_in_request_order(executor);
    check_cancellation(executor);
    check_timeout(executor);
    check_parallel_run_in_request_order(executor); /* the executor is reusable after a cancel */
    check_nested_run_is_refused(executor);
    check_lone_surrogate_input_reads_as_replacement(executor);
    check_arguments(executor);
    fl_executor_free(executor);
    check_invalid_reply();
    check_concurrency_predicate();
    check_inline_completion_past_its_timeout();
    return check_summary("test_exec");
}
