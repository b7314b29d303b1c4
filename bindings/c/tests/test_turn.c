/*
 * Streaming turns: calls submitted one by one, events read while the tools run, results in
 * request order (also before the seal), out-of-order completion, cancellation mid-turn (token and
 * fl_turn_cancel), event and tool timeouts, an unknown tool, misuse statuses (also from tool
 * callbacks), freeing a turn with calls running, several threads at once, and the progress a
 * tool reports (from its callback and from a worker, also after a cancellation; its misuse).
 *
 * Usage: test_turn
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "check.h"

#include "workers.h"

static long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000L + now.tv_nsec / 1000000L;
}

/* ---- shared state of the tools ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static bool released[16]; /* "gate" call i may complete */
static int saw_cancel = 0; /* "hang" calls that observed the cancellation */
static int hang_started = 0;

static void reset_state(void) {
    pthread_mutex_lock(&lock);
    memset(released, 0, sizeof released);
    saw_cancel = 0;
    hang_started = 0;
    pthread_mutex_unlock(&lock);
}

static void release_gate(size_t index) {
    pthread_mutex_lock(&lock);
    released[index] = true;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

typedef struct {
    fl_tool_call *call;
    size_t index;
} work;

static work *new_work(const fl_tool_invocation *invocation, fl_tool_call *call) {
    work *job = calloc(1, sizeof *job);
    job->call = call;
    job->index = invocation->index;
    return job;
}

/* "gate" (safe): completes from a worker thread once the test releases its index. */
static void *gate_worker(void *arg) {
    work *job = arg;
    pthread_mutex_lock(&lock);
    while (job->index < 16 && !released[job->index]) {
        pthread_cond_wait(&changed, &lock);
    }
    pthread_mutex_unlock(&lock);
    char reply[32];
    snprintf(reply, sizeof reply, "gate %zu", job->index);
    CHECK_OK(fl_tool_complete(job->call, reply, strlen(reply), false));
    free(job);
    return NULL;
}

static void gate_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    start_worker(gate_worker, new_work(invocation, call));
}

/* "echo" (safe): completes inline with its input. */
static void echo_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    CHECK_OK(fl_tool_complete(call, invocation->input_json, invocation->input_json_len, false));
}

/* "solo" (exclusive): completes inline. */
static void solo_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    CHECK_OK(fl_tool_complete(call, "solo", 4, false));
}

/* "hang" (safe) and "timed" (safe, 50 ms timeout): run on a worker until cancelled (at most
 * 10 s), then complete. */
static void *hang_worker(void *arg) {
    work *job = arg;
    bool cancelled = false;
    for (int i = 0; i < 10000 && !cancelled; i++) {
        CHECK_OK(fl_tool_call_cancelled(job->call, &cancelled));
        if (!cancelled) {
            sleep_ms(1);
        }
    }
    pthread_mutex_lock(&lock);
    if (cancelled) {
        saw_cancel++;
    }
    pthread_mutex_unlock(&lock);
    /* Delivered until the call ends; dropped once nobody listens (the turn was freed, the call
     * detached): accepted either way. */
    CHECK_OK(fl_tool_call_progress(job->call, "\"stopping\"", 10));
    const char *reply = cancelled ? "stopped early" : "never cancelled";
    /* The reply may be ignored (the turn was freed, or gave up): completing stays harmless. */
    CHECK_OK(fl_tool_complete(job->call, reply, strlen(reply), true));
    free(job);
    return NULL;
}

static void hang_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    pthread_mutex_lock(&lock);
    hang_started++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
    start_worker(hang_worker, new_work(invocation, call));
}

static bool wait_for_hang_started(int count) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    pthread_mutex_lock(&lock);
    int result = 0;
    while (hang_started < count && result == 0) {
        result = pthread_cond_timedwait(&changed, &lock, &deadline);
    }
    bool reached = hang_started >= count;
    pthread_mutex_unlock(&lock);
    return reached;
}

/* "quick" (safe, 50 ms timeout): completes from a worker thread after 5 ms. */
static void *quick_worker(void *arg) {
    sleep_ms(5);
    CHECK_OK(fl_tool_complete(arg, "quick", 5, false));
    return NULL;
}

static void quick_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    start_worker(quick_worker, call);
}

/* "progress" (safe): reports progress from its callback, then from a worker once the callback
 * has returned, and completes the call from the worker. With the input {"wait_cancel":true},
 * the worker first waits (at most 10 s) until the call is cancelled. The progress it cannot
 * report (bad data, no call) is refused with a status, and nothing is reported. */
#define PROGRESS_FROM_CALLBACK "{\"step\":\"callback\",\"of\":2}"
#define PROGRESS_FROM_WORKER "[1, \"two\", {\"three\": 3.5, \"unicode\": \"\\u00e9\xc3\xa9\"}]"
/* As the events report it: written compactly (no spaces, escapes decoded), keys in order. */
#define PROGRESS_FROM_WORKER_JSON "[1,\"two\",{\"three\":3.5,\"unicode\":\"\xc3\xa9\xc3\xa9\"}]"

typedef struct {
    fl_tool_call *call;
    bool wait_cancel;
} progress_job;

static void *progress_worker(void *arg) {
    progress_job *job = arg;
    bool cancelled = false;
    if (job->wait_cancel) {
        for (int i = 0; i < 10000 && !cancelled; i++) {
            CHECK_OK(fl_tool_call_cancelled(job->call, &cancelled));
            if (!cancelled) {
                sleep_ms(1);
            }
        }
        CHECK(cancelled);
    } else {
        sleep_ms(20); /* well after the callback returned */
    }
    CHECK_OK(fl_tool_call_progress(job->call, PROGRESS_FROM_WORKER, strlen(PROGRESS_FROM_WORKER)));
    CHECK_OK(fl_tool_complete(job->call, "reported", 8, false));
    free(job);
    return NULL;
}

static void progress_tool(void *userdata, const fl_tool_invocation *invocation,
                          fl_tool_call *call) {
    (void)userdata;
    CHECK_OK(fl_tool_call_progress(call, PROGRESS_FROM_CALLBACK, strlen(PROGRESS_FROM_CALLBACK)));
    /* Refused, reporting nothing; the call goes on. */
    CHECK_STATUS(fl_tool_call_progress(call, "{\"step\":", 8), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "data_json is not valid JSON") != NULL);
    CHECK_STATUS(fl_tool_call_progress(call, "1 2", 3), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tool_call_progress(call, "", 0), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tool_call_progress(call, NULL, 0), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tool_call_progress(call, "\"\xff\"", 3), FL_STATUS_INVALID_UTF8);
    CHECK(strstr(last_error(), "`data_json` is not valid UTF-8") != NULL);
    CHECK_STATUS(fl_tool_call_progress(call, NULL, 4), FL_STATUS_NULL_ARGUMENT);
    CHECK(strcmp(last_error(), "argument `data_json` must not be NULL") == 0);
    CHECK_STATUS(fl_tool_call_progress(call, "1", (size_t)PTRDIFF_MAX + 1),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_tool_call_progress(NULL, "1", 1), FL_STATUS_NULL_ARGUMENT);
    CHECK(strcmp(last_error(), "argument `call` must not be NULL") == 0);
    progress_job *job = calloc(1, sizeof *job);
    job->call = call;
    job->wait_cancel = text_equals(invocation->input_json, invocation->input_json_len,
                                   "{\"wait_cancel\":true}");
    start_worker(progress_worker, job);
}

/* "misuse": what a tool callback may not do with its turn is refused; what it may do works. */
typedef struct {
    fl_executor *executor;
    fl_turn *turn;  /* the turn running the callback */
    fl_turn *other; /* another live turn */
} misuse_target;

static void misuse_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    misuse_target *target = userdata;
    fl_turn_event event;
    CHECK_STATUS(fl_turn_next_event(target->turn, 0, &event), FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "already in progress") != NULL);
    CHECK_STATUS(fl_turn_next_event(target->other, 0, &event), FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "worker thread") != NULL);
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_executor_run(target->executor, "[]", 2, NULL, &results, &len),
                 FL_STATUS_INVALID_STATE);
    CHECK_STATUS(fl_turn_results(target->turn, &results, &len), FL_STATUS_INVALID_STATE);
    fl_turn_free(target->turn); /* refused: the turn is being driven */
    CHECK(strstr(last_error(), "fl_turn_free") != NULL);
    /* Submitting to its own turn and sealing it are fine. */
    const char *more = "{\"id\":\"m2\",\"name\":\"echo\",\"input\":{\"from\":\"callback\"}}";
    CHECK_OK(fl_turn_submit(target->turn, more, strlen(more)));
    CHECK_OK(fl_turn_seal(target->turn));
    CHECK_OK(fl_tool_complete(call, "misused", 7, false));
}

static misuse_target misuse = {NULL, NULL, NULL};

/* "drive" (in a batch run): driving a turn from a tool callback of fl_executor_run is refused. */
static void drive_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    fl_turn_event event;
    CHECK_STATUS(fl_turn_next_event(*(fl_turn **)userdata, 0, &event), FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "worker thread") != NULL);
    CHECK_OK(fl_tool_complete(call, "refused", 7, false));
}

static fl_turn *drive_target = NULL;

/* "stopper" (safe): cancels its own turn (userdata: where the turn is) from its callback. */
static void stopper_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    CHECK_OK(fl_turn_cancel(*(fl_turn **)userdata));
    bool cancelled = false;
    CHECK_OK(fl_tool_call_cancelled(call, &cancelled));
    CHECK(cancelled);
    CHECK_OK(fl_tool_complete(call, "stopped", 7, false));
}

static fl_turn *stopper_turn = NULL;

/* "nest": creates and frees a turn and an executor inside its callback (the runtimes they own
 * are dropped on a thread that is driving a turn). */
static void nest_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)invocation;
    fl_turn *inner = NULL;
    CHECK_OK(fl_turn_new(userdata, NULL, &inner));
    const char *use = "{\"id\":\"i0\",\"name\":\"echo\",\"input\":{}}";
    CHECK_OK(fl_turn_submit(inner, use, strlen(use)));
    /* A known last error: a panic caught in the _free functions would replace it. */
    CHECK_STATUS(fl_turn_seal(NULL), FL_STATUS_NULL_ARGUMENT);
    fl_turn_free(inner);
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    fl_executor_free(executor);
    CHECK(strcmp(last_error(), "argument `turn` must not be NULL") == 0);
    CHECK_OK(fl_tool_complete(call, "nested", 6, false));
}

/* ---- helpers ---- */

static fl_executor *new_executor(size_t max_concurrency) {
    fl_executor_options options = fl_executor_options_default();
    options.max_concurrency = max_concurrency;
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&options, &executor));
    fl_tool_options safe = fl_tool_options_default();
    safe.concurrency_safe = true;
    fl_tool_options timed = safe;
    timed.timeout_ms = 50;
    CHECK_OK(fl_executor_add_tool(executor, "gate", 4, &safe, gate_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "echo", 4, &safe, echo_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "solo", 4, NULL, solo_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "hang", 4, &safe, hang_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "timed", 5, &timed, hang_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "quick", 5, &timed, quick_tool, NULL));
    CHECK_OK(fl_executor_add_tool(executor, "misuse", 6, NULL, misuse_tool, &misuse));
    CHECK_OK(fl_executor_add_tool(executor, "drive", 5, NULL, drive_tool, &drive_target));
    CHECK_OK(fl_executor_add_tool(executor, "stopper", 7, &safe, stopper_tool, &stopper_turn));
    CHECK_OK(fl_executor_add_tool(executor, "nest", 4, NULL, nest_tool, executor));
    return executor;
}

static void submit(fl_turn *turn, const char *id, const char *tool) {
    char json[160];
    snprintf(json, sizeof json, "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"%s\",\"input\":{}}",
             id, tool);
    CHECK_OK(fl_turn_submit(turn, json, strlen(json)));
}

/* What the events of a turn said, gathered by `drain`. */
typedef struct {
    int started, finished, results, ends, nones;
    size_t result_order[16];  /* the index of each RESULT event, in order */
    size_t finish_order[16];  /* the index of each FINISHED event, in order */
    fl_call_status status[16]; /* FINISHED status per index */
    bool is_error[16];         /* RESULT is_error per index */
} seen;

/* Checks the invariants of one event and records it. */
static void record(seen *s, const fl_turn_event *event) {
    CHECK(event->tool_use_id != NULL && event->tool_name != NULL && event->json != NULL);
    CHECK(event->json[event->json_len] == '\0');
    switch (event->kind) {
    case FL_TURN_EVENT_NONE:
        s->nones++;
        CHECK(event->json_len == 0);
        break;
    case FL_TURN_EVENT_END:
        s->ends++;
        CHECK(event->json_len == 0);
        break;
    case FL_TURN_EVENT_STARTED:
        s->started++;
        CHECK(strncmp(event->json, "{\"type\":\"started\"", 17) == 0);
        break;
    case FL_TURN_EVENT_FINISHED:
        CHECK(event->status != FL_CALL_NONE);
        CHECK(strncmp(event->json, "{\"type\":\"finished\"", 18) == 0);
        if (event->index < 16) {
            s->status[event->index] = event->status;
        }
        if (s->finished < 16) {
            s->finish_order[s->finished] = event->index;
        }
        s->finished++;
        break;
    case FL_TURN_EVENT_RESULT:
        CHECK(strncmp(event->json, "{\"type\":\"tool_result\",\"tool_use_id\":\"", 37) == 0);
        CHECK(strstr(event->json, event->is_error ? "\"is_error\":true" : "\"is_error\":false") !=
              NULL);
        if (event->index < 16) {
            s->is_error[event->index] = event->is_error;
        }
        if (s->results < 16) {
            s->result_order[s->results] = event->index;
        }
        s->results++;
        break;
    default:
        break;
    }
}

/* Reads events until END (or until nothing came for `idle_ms` when `until_idle`). */
static void drain(fl_turn *turn, seen *s, bool until_idle, int64_t idle_ms) {
    for (int i = 0; i < 1000; i++) {
        fl_turn_event event;
        fl_status status = fl_turn_next_event(turn, until_idle ? idle_ms : 10000, &event);
        CHECK_OK(status);
        if (status != FL_STATUS_OK) {
            return;
        }
        record(s, &event);
        if (event.kind == FL_TURN_EVENT_END || (until_idle && event.kind == FL_TURN_EVENT_NONE)) {
            return;
        }
        CHECK(event.kind != FL_TURN_EVENT_NONE); /* 10 s without an event: stuck */
    }
    CHECK(!"too many events");
}

/* Reads events until call `index` has FINISHED. */
static void drain_until_finished(fl_turn *turn, seen *s, size_t index) {
    for (int i = 0; i < 100; i++) {
        fl_turn_event event;
        CHECK_OK(fl_turn_next_event(turn, 10000, &event));
        record(s, &event);
        if (event.kind == FL_TURN_EVENT_FINISHED && event.index == index) {
            return;
        }
        if (event.kind == FL_TURN_EVENT_NONE || event.kind == FL_TURN_EVENT_END) {
            CHECK(!"the call never finished");
            return;
        }
    }
}

/* ---- scenarios ---- */

/* Calls complete out of order; results come in request order, before the seal. */
static void check_order_and_results_before_seal(fl_executor *executor) {
    reset_state();
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "g0", "gate");
    submit(turn, "g1", "gate");
    submit(turn, "e2", "echo");
    seen s = {0};
    /* Everything starts; the echo finishes at once; no result yet (g0 is the first). */
    drain(turn, &s, true, 100);
    CHECK(s.started == 3 && s.finished == 1 && s.results == 0 && s.ends == 0);
    CHECK(s.finish_order[0] == 2);
    /* g1 completes first: finished, but its result waits for g0's. */
    release_gate(1);
    drain_until_finished(turn, &s, 1);
    drain(turn, &s, true, 50);
    CHECK(s.results == 0);
    release_gate(0);
    drain(turn, &s, true, 200);
    /* Still not sealed: all three results are out, in request order, and no END. */
    CHECK(s.results == 3 && s.ends == 0);
    CHECK(s.result_order[0] == 0 && s.result_order[1] == 1 && s.result_order[2] == 2);
    CHECK(s.finish_order[0] == 2 && s.finish_order[1] == 1 && s.finish_order[2] == 0);
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_INVALID_STATE);
    /* A call submitted after results went out comes after them. */
    submit(turn, "e3", "echo");
    CHECK_OK(fl_turn_seal(turn));
    drain(turn, &s, false, 0);
    CHECK(s.results == 4 && s.result_order[3] == 3 && s.ends == 1);
    /* END repeats. */
    fl_turn_event event;
    CHECK_OK(fl_turn_next_event(turn, 0, &event));
    CHECK(event.kind == FL_TURN_EVENT_END);
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL && strlen(results) == len);
    const char *expected =
        "[{\"type\":\"tool_result\",\"tool_use_id\":\"g0\",\"content\":\"gate 0\",\"is_error\":false},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"g1\",\"content\":\"gate 1\",\"is_error\":false},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"e2\",\"content\":\"{}\",\"is_error\":false},"
        "{\"type\":\"tool_result\",\"tool_use_id\":\"e3\",\"content\":\"{}\",\"is_error\":false}]";
    CHECK(results != NULL && strcmp(results, expected) == 0);
    if (results != NULL && strcmp(results, expected) != 0) {
        fprintf(stderr, "    results: %s\n", results);
    }
    fl_turn_free(turn);
    join_workers();
}

/* The views of one event: the typed fields and the JSON agree. */
static void check_event_fields(fl_executor *executor) {
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    const char *call = "{\"id\":\"toolu_x\",\"name\":\"echo\",\"input\":{\"a\":1}}";
    CHECK_OK(fl_turn_submit(turn, call, strlen(call)));
    CHECK_OK(fl_turn_seal(turn));
    fl_turn_event event;
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_STARTED && event.index == 0);
    CHECK(text_equals(event.tool_use_id, event.tool_use_id_len, "toolu_x"));
    CHECK(text_equals(event.tool_name, event.tool_name_len, "echo"));
    CHECK(strstr(event.json, "\"queued_ms\":") != NULL);
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_FINISHED && event.status == FL_CALL_SUCCEEDED);
    CHECK(strstr(event.json, "\"status\":\"succeeded\"") != NULL);
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_RESULT && !event.is_error);
    CHECK(text_equals(event.tool_use_id, event.tool_use_id_len, "toolu_x"));
    CHECK(text_equals(event.json, event.json_len,
                      "{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_x\","
                      "\"content\":\"{\\\"a\\\":1}\",\"is_error\":false}"));
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_END && event.index == 0 && event.status == FL_CALL_NONE);
    fl_turn_free(turn);
}

/* One event of a turn, copied (its views die at the next fl_turn_next_event). */
typedef struct {
    fl_turn_event_kind kind;
    size_t index;
    char tool_use_id[32];
    size_t tool_name_len;
    fl_call_status status;
    bool is_error;
    char json[256];
} copied_event;

/* Reads the next event into `*copy`; false when none came within 10 s (or on an error). */
static bool read_event(fl_turn *turn, copied_event *copy) {
    fl_turn_event event;
    fl_status status = fl_turn_next_event(turn, 10000, &event);
    CHECK_OK(status);
    CHECK(status != FL_STATUS_OK || event.kind != FL_TURN_EVENT_NONE); /* stuck */
    if (status != FL_STATUS_OK || event.kind == FL_TURN_EVENT_NONE) {
        return false;
    }
    copy->kind = event.kind;
    copy->index = event.index;
    snprintf(copy->tool_use_id, sizeof copy->tool_use_id, "%.*s", (int)event.tool_use_id_len,
             event.tool_use_id);
    copy->tool_name_len = event.tool_name_len;
    copy->status = event.status;
    copy->is_error = event.is_error;
    snprintf(copy->json, sizeof copy->json, "%.*s", (int)event.json_len, event.json);
    CHECK(event.json[event.json_len] == '\0');
    return true;
}

/* Reads the events of a sealed turn up to END (at most `max`); returns how many came. */
static int read_all(fl_turn *turn, copied_event *events, int max) {
    for (int count = 0; count < max; count++) {
        if (!read_event(turn, &events[count])) {
            return count;
        }
        if (events[count].kind == FL_TURN_EVENT_END) {
            return count + 1;
        }
    }
    CHECK(!"too many events");
    return max;
}

static bool is_progress(const copied_event *event, const char *json) {
    return event->kind == FL_TURN_EVENT_PROGRESS && event->index == 0 &&
           strcmp(event->tool_use_id, "toolu_p") == 0 && event->tool_name_len == 0 &&
           event->status == FL_CALL_NONE && !event->is_error && strcmp(event->json, json) == 0;
}

/* A tool's progress: PROGRESS events of its call with the data as reported (compactly written),
 * in order, between its STARTED and FINISHED, from the callback and from a worker after the
 * callback returned; still delivered after the call was cancelled, until the tool completes
 * it. A batch run has no events: the progress is dropped, the calls complete as usual. */
static void check_progress(void) {
    /* A cancelled call ends when its tool completes it, unless the cleanup grace runs out
     * first: a grace of 60 s (its default is 5 s) keeps it a hang guard. */
    fl_executor_options options = fl_executor_options_default();
    options.cleanup_grace_ms = 60000;
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&options, &executor));
    fl_tool_options safe = fl_tool_options_default();
    safe.concurrency_safe = true;
    CHECK_OK(fl_executor_add_tool(executor, "progress", 8, &safe, progress_tool, NULL));
    for (int wait_cancel = 0; wait_cancel < 2; wait_cancel++) {
        fl_turn *turn = NULL;
        CHECK_OK(fl_turn_new(executor, NULL, &turn));
        const char *use = wait_cancel ? "{\"id\":\"toolu_p\",\"name\":\"progress\","
                                        "\"input\":{\"wait_cancel\":true}}"
                                      : "{\"id\":\"toolu_p\",\"name\":\"progress\",\"input\":{}}";
        CHECK_OK(fl_turn_submit(turn, use, strlen(use)));
        copied_event events[16];
        memset(events, 0, sizeof events);
        int count = 0;
        if (wait_cancel) {
            /* The call started (its worker waits for the cancellation): cancel the turn. */
            count = read_event(turn, &events[0]) ? 1 : 0;
            CHECK(count == 1 && events[0].kind == FL_TURN_EVENT_STARTED);
            CHECK_OK(fl_turn_cancel(turn));
        }
        CHECK_OK(fl_turn_seal(turn));
        count += read_all(turn, events + count, 16 - count);
        join_workers();
        CHECK(count == 6);
        if (count != 6) {
            for (int i = 0; i < count; i++) {
                fprintf(stderr, "    event %d: kind %d %s\n", i, (int)events[i].kind,
                        events[i].json);
            }
            fl_turn_free(turn);
            continue;
        }
        CHECK(events[0].kind == FL_TURN_EVENT_STARTED && events[0].index == 0);
        CHECK(is_progress(&events[1], PROGRESS_FROM_CALLBACK));
        CHECK(is_progress(&events[2], PROGRESS_FROM_WORKER_JSON));
        if (!is_progress(&events[2], PROGRESS_FROM_WORKER_JSON)) {
            fprintf(stderr, "    progress: %s\n", events[2].json);
        }
        CHECK(events[3].kind == FL_TURN_EVENT_FINISHED && events[3].index == 0);
        CHECK(events[3].status == (wait_cancel ? FL_CALL_CANCELLED : FL_CALL_SUCCEEDED));
        CHECK(events[4].kind == FL_TURN_EVENT_RESULT && events[4].is_error == (wait_cancel != 0));
        CHECK(events[5].kind == FL_TURN_EVENT_END);
        const char *results = NULL;
        size_t len = 0;
        CHECK_STATUS(fl_turn_results(turn, &results, &len),
                     wait_cancel ? FL_STATUS_CANCELLED : FL_STATUS_OK);
        const char *outcome = wait_cancel ? "was cancelled" : "\"content\":\"reported\"";
        CHECK(results != NULL && strstr(results, outcome) != NULL);
        fl_turn_free(turn);
    }

    /* A batch run: the tool reports, nobody listens, the calls complete. */
    const char *calls = "[{\"id\":\"b0\",\"name\":\"progress\",\"input\":{}},"
                        "{\"id\":\"b1\",\"name\":\"progress\",\"input\":{}}]";
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    join_workers();
    const char *expected = "[{\"type\":\"tool_result\",\"tool_use_id\":\"b0\","
                           "\"content\":\"reported\",\"is_error\":false},"
                           "{\"type\":\"tool_result\",\"tool_use_id\":\"b1\","
                           "\"content\":\"reported\",\"is_error\":false}]";
    CHECK(results != NULL && strcmp(results, expected) == 0);
    fl_executor_free(executor);
}

/* An unknown tool gets an error result; the turn goes on. */
static void check_unknown_tool(fl_executor *executor) {
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "u0", "nope");
    submit(turn, "e1", "echo");
    submit(turn, "n2", "nest");
    CHECK_OK(fl_turn_seal(turn));
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.status[0] == FL_CALL_REJECTED && s.is_error[0]);
    CHECK(s.status[1] == FL_CALL_SUCCEEDED && !s.is_error[1]);
    CHECK(s.status[2] == FL_CALL_SUCCEEDED && !s.is_error[2]);
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL && strstr(results, "nope") != NULL);
    fl_turn_free(turn);
}

/* A use without an input runs its tool with {} (the core's rule, as fl_executor_run). */
static void check_missing_input(fl_executor *executor) {
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    const char *use = "{\"type\":\"tool_use\",\"id\":\"m0\",\"name\":\"echo\"}";
    CHECK_OK(fl_turn_submit(turn, use, strlen(use)));
    const char *no_id = "{\"name\":\"echo\",\"input\":{}}";
    CHECK_STATUS(fl_turn_submit(turn, no_id, strlen(no_id)), FL_STATUS_INVALID_ARGUMENT);
    CHECK_OK(fl_turn_seal(turn));
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.status[0] == FL_CALL_SUCCEEDED && !s.is_error[0]);
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL && strstr(results, "\"tool_use_id\":\"m0\",\"content\":\"{}\"") != NULL);
    fl_turn_free(turn);
}

/* Waiting for an event times out with NONE; a tool's timeout gives an error result. */
static void check_timeouts(fl_executor *executor) {
    reset_state();
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    fl_turn_event event;
    long before = now_ms();
    CHECK_OK(fl_turn_next_event(turn, 0, &event));
    CHECK(event.kind == FL_TURN_EVENT_NONE);
    CHECK_OK(fl_turn_next_event(turn, 60, &event));
    CHECK(event.kind == FL_TURN_EVENT_NONE);
    long waited = now_ms() - before;
    CHECK(waited >= 55 && waited < 5000);
    /* A timeout of 0 still starts what it can. */
    submit(turn, "t0", "timed");
    CHECK_OK(fl_turn_next_event(turn, 0, &event));
    CHECK(event.kind == FL_TURN_EVENT_STARTED);
    CHECK_OK(fl_turn_seal(turn));
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.status[0] == FL_CALL_TIMED_OUT && s.is_error[0] && s.ends == 1);
    join_workers();
    CHECK(saw_cancel == 1);
    fl_turn_free(turn);

    /* A host that polls sparsely (between reads of the model's stream): a reply that came well
     * within the timeout, read only after the deadline, is still on time. */
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "q0", "quick");
    CHECK_OK(fl_turn_seal(turn));
    CHECK_OK(fl_turn_next_event(turn, 0, &event));
    CHECK(event.kind == FL_TURN_EVENT_STARTED);
    sleep_ms(300);
    seen q = {0};
    drain(turn, &q, false, 0);
    join_workers();
    CHECK(q.status[0] == FL_CALL_SUCCEEDED && !q.is_error[0]);
    fl_turn_free(turn);
}

static void *cancel_later(void *arg) {
    sleep_ms(20);
    CHECK_OK(fl_cancel_token_cancel(arg));
    return NULL;
}

/* Cancelling the token mid-turn cancels the running calls, skips the queued and later ones. */
static void check_cancellation(fl_executor *executor) {
    reset_state();
    fl_cancel_token *token = NULL;
    CHECK_OK(fl_cancel_token_new(&token));
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, token, &turn));
    submit(turn, "h0", "hang");
    submit(turn, "h1", "hang");
    submit(turn, "s2", "solo"); /* exclusive: queued behind the two hangs */
    seen s = {0};
    /* Both hangs run and the turn is idle: the cancellation comes while it waits. */
    drain(turn, &s, true, 100);
    CHECK(s.started == 2 && wait_for_hang_started(2));
    pthread_t canceller;
    CHECK(pthread_create(&canceller, NULL, cancel_later, token) == 0);
    /* Blocks until the cancellation lets the calls finish. */
    drain_until_finished(turn, &s, 0);
    pthread_join(canceller, NULL);
    submit(turn, "e3", "echo"); /* after the cancellation: never starts */
    CHECK_OK(fl_turn_seal(turn));
    drain(turn, &s, false, 0);
    join_workers();
    CHECK(saw_cancel == 2);
    CHECK(s.started == 2);
    CHECK(s.status[0] == FL_CALL_CANCELLED && s.status[1] == FL_CALL_CANCELLED);
    CHECK(s.status[2] == FL_CALL_SKIPPED && s.status[3] == FL_CALL_SKIPPED);
    CHECK(s.results == 4 && s.is_error[0] && s.is_error[1] && s.is_error[2] && s.is_error[3]);
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_CANCELLED);
    CHECK(results != NULL && strstr(results, "\"is_error\":false") == NULL);
    fl_turn_free(turn);

    /* A token cancelled earlier: nothing starts. The token may be freed before the turn. */
    CHECK_OK(fl_turn_new(executor, token, &turn));
    fl_cancel_token_free(token);
    submit(turn, "e0", "echo");
    CHECK_OK(fl_turn_seal(turn));
    seen t = {0};
    drain(turn, &t, false, 0);
    CHECK(t.started == 0 && t.status[0] == FL_CALL_SKIPPED && t.is_error[0]);
    CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_CANCELLED);
    fl_turn_free(turn);

    /* fl_turn_cancel, without a token. */
    reset_state();
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "h0", "hang");
    fl_turn_event event;
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_STARTED);
    CHECK(wait_for_hang_started(1));
    CHECK_OK(fl_turn_cancel(turn));
    CHECK_OK(fl_turn_cancel(turn)); /* idempotent */
    CHECK_OK(fl_turn_seal(turn));
    seen u = {0};
    drain(turn, &u, false, 0);
    join_workers();
    CHECK(u.status[0] == FL_CALL_CANCELLED && u.is_error[0] && saw_cancel == 1);
    /* FL_STATUS_CANCELLED records its own message, as every non-OK status does: the last error
     * does not still describe an older, unrelated failure. */
    CHECK_STATUS(fl_decoder_new("bogus", 5, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_CANCELLED);
    CHECK(strstr(last_error(), "cancelled") != NULL);
    fl_turn_free(turn);
}

/* A reply and a cancellation that both happened before the turn polls the call again: their
 * order decides, not the poll. A worker's reply sent before fl_turn_cancel stands; one sent
 * after it (the worker answering anyway) is the cancellation's. */
static void check_cancellation_by_order(fl_executor *executor) {
    for (int reply_first = 1; reply_first >= 0; reply_first--) {
        reset_state();
        fl_turn *turn = NULL;
        CHECK_OK(fl_turn_new(executor, NULL, &turn));
        submit(turn, "g0", "gate");
        seen s = {0};
        /* The call started and waits for its worker; the turn is idle. */
        drain(turn, &s, true, 50);
        CHECK(s.started == 1 && s.finished == 0);
        if (!reply_first) {
            CHECK_OK(fl_turn_cancel(turn));
        }
        release_gate(0);
        join_workers(); /* the reply is sent */
        if (reply_first) {
            CHECK_OK(fl_turn_cancel(turn));
        }
        CHECK_OK(fl_turn_seal(turn));
        drain(turn, &s, false, 0);
        const char *results = NULL;
        size_t len = 0;
        CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_CANCELLED);
        if (reply_first) {
            CHECK(s.status[0] == FL_CALL_SUCCEEDED && !s.is_error[0]);
            CHECK(results != NULL && strstr(results, "\"content\":\"gate 0\"") != NULL);
        } else {
            CHECK(s.status[0] == FL_CALL_CANCELLED && s.is_error[0]);
            CHECK(results != NULL &&
                  strstr(results, "Tool 'gate' was cancelled: the turn was cancelled") != NULL);
        }
        fl_turn_free(turn);
    }
}

/* A tool that cancels its own turn from its callback: it sees the cancellation at once, and the
 * calls queued behind it never start, as in fl_executor_run. */
static void check_cancel_from_callback(fl_executor *executor) {
    CHECK_OK(fl_turn_new(executor, NULL, &stopper_turn));
    submit(stopper_turn, "s0", "stopper");
    submit(stopper_turn, "x1", "solo"); /* exclusive: queued behind the stopper */
    submit(stopper_turn, "e2", "echo");
    CHECK_OK(fl_turn_seal(stopper_turn));
    seen s = {0};
    drain(stopper_turn, &s, false, 0);
    CHECK(s.started == 1);
    CHECK(s.status[1] == FL_CALL_SKIPPED && s.status[2] == FL_CALL_SKIPPED);
    CHECK(s.is_error[1] && s.is_error[2]);
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_turn_results(stopper_turn, &results, &len), FL_STATUS_CANCELLED);
    fl_turn_free(stopper_turn);
    stopper_turn = NULL;
}

/* Freeing a turn with calls running cancels them and returns at once. */
static void check_free_while_running(fl_executor *executor) {
    reset_state();
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "h0", "hang");
    submit(turn, "h1", "hang");
    submit(turn, "s2", "solo"); /* queued */
    fl_turn_event event;
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(wait_for_hang_started(2));
    long before = now_ms();
    fl_turn_free(turn); /* not sealed, two calls running, one queued */
    CHECK(now_ms() - before < 2000);
    join_workers(); /* the workers saw the cancellation and completed their calls */
    CHECK(saw_cancel == 2);

    /* A turn never driven, and one with a call never started. */
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    fl_turn_free(turn);
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "g0", "gate");
    fl_turn_free(turn);
    fl_turn_free(NULL);
}

/* The executor may be freed before its turns. */
static void check_executor_freed_first(void) {
    fl_executor *executor = new_executor(4);
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    /* Tools are fixed once the executor has started a turn. */
    CHECK_STATUS(fl_executor_add_tool(executor, "late", 4, NULL, echo_tool, NULL),
                 FL_STATUS_INVALID_STATE);
    fl_executor_free(executor);
    submit(turn, "e0", "echo");
    CHECK_OK(fl_turn_seal(turn));
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.status[0] == FL_CALL_SUCCEEDED && s.ends == 1);
    fl_turn_free(turn);
}

static void check_misuse(fl_executor *executor) {
    fl_turn *turn = NULL;
    fl_turn_event event;
    const char *results = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_turn_new(NULL, NULL, &turn), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_new(executor, NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_submit(NULL, "{}", 2), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_seal(NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_cancel(NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_next_event(NULL, 0, &event), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_results(NULL, &results, &len), FL_STATUS_NULL_ARGUMENT);

    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    CHECK_STATUS(fl_turn_next_event(turn, 0, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_results(turn, NULL, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_results(turn, &results, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_submit(turn, NULL, 5), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_turn_submit(turn, NULL, 0), FL_STATUS_INVALID_ARGUMENT); /* "" is no JSON */
    CHECK_STATUS(fl_turn_submit(turn, "{\"id\":\"\xff\"}", 10), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_turn_submit(turn, "{\"id\":", 6), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "tool_use") != NULL);
    const char *no_name = "{\"id\":\"x\",\"input\":{}}";
    CHECK_STATUS(fl_turn_submit(turn, no_name, strlen(no_name)), FL_STATUS_INVALID_ARGUMENT);
    const char *array = "[{\"id\":\"x\",\"name\":\"echo\",\"input\":{}}]";
    CHECK_STATUS(fl_turn_submit(turn, array, strlen(array)), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_turn_submit(turn, "{}", (size_t)-1), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_turn_submit(turn, "{}", (size_t)PTRDIFF_MAX + 1), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_turn_results(turn, &results, &len), FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "FL_TURN_EVENT_END") != NULL);
    /* None of the refused submissions made a call. */
    CHECK_OK(fl_turn_seal(turn));
    /* Sealing again is a no-op, as in Python and Node. */
    CHECK_OK(fl_turn_seal(turn));
    CHECK_STATUS(fl_turn_submit(turn, "{\"id\":\"late\",\"name\":\"echo\",\"input\":{}}", 38),
                 FL_STATUS_INVALID_STATE);
    CHECK(strstr(last_error(), "late") != NULL);
    CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    CHECK(event.kind == FL_TURN_EVENT_END);
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(len == 2 && strcmp(results, "[]") == 0);
    fl_turn_free(turn);

    /* From a tool callback: driving any turn or running any executor is refused, freeing its
     * own turn is refused, submitting and sealing work. */
    fl_turn *other = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    CHECK_OK(fl_turn_new(executor, NULL, &other));
    misuse.executor = executor;
    misuse.turn = turn;
    misuse.other = other;
    submit(turn, "m1", "misuse");
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.results == 2 && s.status[0] == FL_CALL_SUCCEEDED && s.status[1] == FL_CALL_SUCCEEDED);
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"misused\"") != NULL);
    CHECK(results != NULL && strstr(results, "callback") != NULL);
    fl_turn_free(turn);
    fl_turn_free(other);

    /* From a tool callback of a batch run: driving a turn is refused too. */
    CHECK_OK(fl_turn_new(executor, NULL, &drive_target));
    const char *calls = "[{\"id\":\"d\",\"name\":\"drive\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"content\":\"refused\"") != NULL);
    /* The turn is unharmed, and the longest timeout is fine. */
    submit(drive_target, "e0", "echo");
    CHECK_OK(fl_turn_seal(drive_target));
    seen t = {0};
    for (int i = 0; i < 10 && t.ends == 0; i++) {
        CHECK_OK(fl_turn_next_event(drive_target, INT64_MAX, &event));
        record(&t, &event);
    }
    CHECK(t.results == 1 && t.ends == 1 && t.status[0] == FL_CALL_SUCCEEDED);
    fl_turn_free(drive_target);
    drive_target = NULL;
}

/* ---- several threads ---- */

typedef struct {
    fl_executor *executor;
    int id;
} thread_job;

/* Each thread runs a whole turn of its own on the shared executor. */
static void *turn_thread(void *arg) {
    thread_job *job = arg;
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(job->executor, NULL, &turn));
    char ids[4][16];
    for (int i = 0; i < 4; i++) {
        snprintf(ids[i], sizeof ids[i], "t%d_%d", job->id, i);
        submit(turn, ids[i], i == 2 ? "solo" : "echo");
    }
    CHECK_OK(fl_turn_seal(turn));
    seen s = {0};
    drain(turn, &s, false, 0);
    CHECK(s.results == 4 && s.ends == 1);
    for (int i = 0; i < 4; i++) {
        CHECK(s.result_order[i] == (size_t)i);
    }
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_turn_results(turn, &results, &len));
    const char *at = results;
    for (int i = 0; i < 4 && at != NULL; i++) {
        at = strstr(at, ids[i]);
        CHECK(at != NULL);
    }
    fl_turn_free(turn);
    return NULL;
}

typedef struct {
    fl_turn *turn;
    int count;
} producer_job;

/* Submits calls one by one, like a model's stream, then seals the turn. */
static void *producer(void *arg) {
    producer_job *job = arg;
    for (int i = 0; i < job->count; i++) {
        char id[16];
        snprintf(id, sizeof id, "p%d", i);
        submit(job->turn, id, i % 3 == 2 ? "solo" : "echo");
        sleep_ms(2);
    }
    CHECK_OK(fl_turn_seal(job->turn));
    return NULL;
}

static void check_threads(fl_executor *executor) {
    pthread_t threads[4];
    thread_job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].executor = executor;
        jobs[i].id = i;
        CHECK(pthread_create(&threads[i], NULL, turn_thread, &jobs[i]) == 0);
    }
    /* Meanwhile, on this thread: a turn fed by a producer thread, read without a timeout. */
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    producer_job job = {turn, 12};
    pthread_t feeder;
    CHECK(pthread_create(&feeder, NULL, producer, &job) == 0);
    seen s = {0};
    for (int i = 0; i < 1000; i++) {
        fl_turn_event event;
        CHECK_OK(fl_turn_next_event(turn, -1, &event));
        record(&s, &event);
        if (event.kind == FL_TURN_EVENT_END) {
            break;
        }
    }
    pthread_join(feeder, NULL);
    CHECK(s.results == 12 && s.ends == 1 && s.nones == 0);
    for (int i = 0; i < 12; i++) {
        CHECK(s.result_order[i] == (size_t)i);
    }
    fl_turn_free(turn);
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
    }
    /* A batch run still works beside turns. */
    const char *results = NULL;
    size_t len = 0;
    const char *calls = "[{\"id\":\"b\",\"name\":\"echo\",\"input\":{}}]";
    CHECK_OK(fl_executor_run(executor, calls, strlen(calls), NULL, &results, &len));
    CHECK(results != NULL && strstr(results, "\"tool_use_id\":\"b\"") != NULL);
}

/* "exclusive": a tool that is not concurrency-safe, which waits in its callback until a second
 * callback of it runs at the same time (on another thread), or 2 s pass. */
static atomic_int exclusive_inside = 0;
static atomic_int exclusive_most = 0;
static void exclusive_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    int inside = ++exclusive_inside;
    int most = exclusive_most;
    while (inside > most && !atomic_compare_exchange_weak(&exclusive_most, &most, inside)) {
    }
    for (int waited = 0; exclusive_most < 2 && waited < 2000; waited += 5) {
        sleep_ms(5);
    }
    --exclusive_inside;
    CHECK_OK(fl_tool_complete(call, invocation->input_json, invocation->input_json_len, false));
}

static void *drive_one_exclusive_call(void *arg) {
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(arg, NULL, &turn));
    submit(turn, "x", "exclusive");
    CHECK_OK(fl_turn_seal(turn));
    fl_turn_event event;
    do {
        CHECK_OK(fl_turn_next_event(turn, 10000, &event));
    } while (event.kind != FL_TURN_EVENT_END);
    fl_turn_free(turn);
    return NULL;
}

/* Turns of one executor driven on two threads call a tool that is not concurrency-safe on both
 * at the same time (with the same userdata): `concurrency_safe` orders the calls of one run or
 * turn, as the header says of `fl_tool_fn`, not the calls of every turn of the executor. */
static void check_exclusive_tool_on_two_threads(void) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "exclusive", 9, NULL, exclusive_tool, NULL));
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&threads[i], NULL, drive_one_exclusive_call, executor) == 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(threads[i], NULL);
    }
    CHECK(exclusive_most == 2);
    fl_executor_free(executor);
}

/* "keeper": keeps its call (in `kept_call`) and never completes it during the turn. */
static fl_tool_call *kept_call = NULL;
static void keeper_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    kept_call = call;
}

/* A call that outlives its timeout and its cleanup grace: STARTED, then DETACHED just before
 * its FINISHED (timed out), then its RESULT and END, as the header orders them; the call reports
 * the cancellation, progress reported from then on is dropped (FL_STATUS_OK), and completing
 * it after the turn is freed is harmless. */
static void check_detached(void) {
    fl_executor_options options = fl_executor_options_default();
    options.cleanup_grace_ms = 50;
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&options, &executor));
    fl_tool_options tool = fl_tool_options_default();
    tool.timeout_ms = 20;
    CHECK_OK(fl_executor_add_tool(executor, "keeper", 6, &tool, keeper_tool, NULL));
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    submit(turn, "k0", "keeper");
    CHECK_OK(fl_turn_seal(turn));
    fl_turn_event_kind kinds[8];
    fl_call_status finished = FL_CALL_NONE;
    int count = 0;
    fl_turn_event event;
    do {
        CHECK_OK(fl_turn_next_event(turn, 10000, &event));
        if (event.kind == FL_TURN_EVENT_NONE) break;
        if (event.kind == FL_TURN_EVENT_FINISHED) finished = event.status;
        if (event.kind == FL_TURN_EVENT_DETACHED) {
            CHECK(text_equals(event.tool_use_id, event.tool_use_id_len, "k0"));
            CHECK(text_equals(event.tool_name, event.tool_name_len, "keeper"));
            CHECK(strstr(event.json, "\"type\":\"detached\"") != NULL);
        }
        if (count < 8) kinds[count] = event.kind;
        count++;
    } while (event.kind != FL_TURN_EVENT_END && count < 8);
    CHECK(count == 5);
    if (count == 5) {
        CHECK(kinds[0] == FL_TURN_EVENT_STARTED && kinds[1] == FL_TURN_EVENT_DETACHED &&
              kinds[2] == FL_TURN_EVENT_FINISHED && kinds[3] == FL_TURN_EVENT_RESULT &&
              kinds[4] == FL_TURN_EVENT_END);
    }
    CHECK(finished == FL_CALL_TIMED_OUT);
    CHECK(kept_call != NULL);
    if (kept_call != NULL) {
        bool cancelled = false;
        CHECK_OK(fl_tool_call_cancelled(kept_call, &cancelled));
        CHECK(cancelled);
        CHECK_OK(fl_tool_call_progress(kept_call, "1", 1));
        CHECK_OK(fl_turn_next_event(turn, 0, &event));
        CHECK(event.kind == FL_TURN_EVENT_END);
    }
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_turn_results(turn, &results, &len));
    CHECK(results != NULL && strstr(results, "timed out") != NULL);
    fl_turn_free(turn);
    if (kept_call != NULL) {
        CHECK_OK(fl_tool_complete(kept_call, "late", 4, false));
        kept_call = NULL;
    }
    fl_executor_free(executor);
}

int main(void) {
    fl_executor *executor = new_executor(10);
    check_order_and_results_before_seal(executor);
    check_event_fields(executor);
    check_unknown_tool(executor);
    check_missing_input(executor);
    check_timeouts(executor);
    check_cancellation(executor);
    check_cancellation_by_order(executor);
    check_cancel_from_callback(executor);
    check_free_while_running(executor);
    check_misuse(executor);
    check_threads(executor);
    check_exclusive_tool_on_two_threads();
    check_detached();
    fl_executor_free(executor);
    check_executor_freed_first();
    check_progress();
    return check_summary("test_turn");
}
