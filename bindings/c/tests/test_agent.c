/*
 * The agent loop through the C API: fl_client + fl_agent against a loopback HTTP server (a
 * forked child answering canned Anthropic SSE streams), with tools written in C.
 *
 * - a run that calls a C tool, then answers: the events in order, the tool callback on the
 *   thread driving the run, the tool result in the second request's body, the final history;
 * - cancellation while a tool blocks (fl_agent_run_cancel, a cancel token), and a run freed
 *   while its tool blocks: the tool sees the cancellation, the run stops `aborted`, nothing
 *   leaks or hangs;
 * - a tool reporting progress from its callback and from a worker: `tool_progress` events
 *   with its data, between its `tool_started` and `tool_finished`; also after a cancellation;
 * - a built-in tool (`read` in a workspace) beside them;
 * - two runs of one agent driven on two threads at once;
 * - a tool callback of one run freeing another run, its agent and its client (their last
 *   owner): the freed client's thread has stopped by the time the driving call returns; the
 *   first run's own agent freed mid-run;
 * - objects made before fork(), freed in the child while a built-in tool's worker thread (the
 *   run's blocking pool, which the child has no copy of) is alive: every free returns at once,
 *   and the executor and the turn still run their C tools there;
 * - an HTTP 400 answer: a `stop` event with reason `error` and error_code `invalid_request`,
 *   its `status` and `request_id`; an HTTP 429 with `retry-after` (no retries): error_code
 *   `rate_limited` and `retry_after` in milliseconds;
 * - an `overloaded_error` event after the response started (no fallback model): the partial
 *   turn discarded and the turn asked again under its number, then the answer;
 * - option and argument errors.
 *
 * No network beyond 127.0.0.1. Timeouts are hang guards only, never assertions.
 *
 * Usage: test_agent
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#include "workers.h"

#include "loopback.h"

/* ---- canned Anthropic streams (the shapes of tests/fixtures/anthropic) ---- */

#define EVENT(type, data) "event: " type "\ndata: " data "\n\n"
#define SSE "text/event-stream"

#define TOOL_TURN(tool, id) TOOL_TURN_INPUT(tool, id, "{\\\"city\\\": \\\"Pa", "ris\\\"}")

/* A turn calling `tool` with the input streamed as two fragments (JSON-escaped). */
#define TOOL_TURN_INPUT(tool, id, part1, part2)                                                    \
    EVENT("message_start",                                                                         \
          "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","        \
          "\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,"  \
          "\"stop_sequence\":null,\"usage\":{\"input_tokens\":377,\"cache_creation_input_tokens\":0," \
          "\"cache_read_input_tokens\":0,\"output_tokens\":1}}}")                                  \
    EVENT("content_block_start",                                                                   \
          "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","    \
          "\"text\":\"\"}}")                                                                       \
    EVENT("ping", "{\"type\": \"ping\"}")                                                          \
    EVENT("content_block_delta",                                                                   \
          "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","      \
          "\"text\":\"Let me check.\"}}")                                                          \
    EVENT("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}")                   \
    EVENT("content_block_start",                                                                   \
          "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\"," \
          "\"id\":\"" id "\",\"name\":\"" tool "\",\"input\":{}}}")                                \
    EVENT("content_block_delta",                                                                   \
          "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"," \
          "\"partial_json\":\"" part1 "\"}}")                                                       \
    EVENT("content_block_delta",                                                                   \
          "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\"," \
          "\"partial_json\":\"" part2 "\"}}")                                                       \
    EVENT("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":1}")                   \
    EVENT("message_delta",                                                                         \
          "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","                   \
          "\"stop_sequence\":null},\"usage\":{\"output_tokens\":65}}")                             \
    EVENT("message_stop", "{\"type\":\"message_stop\"}")

static const char answer_turn[] =
    EVENT("message_start",
          "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\","
          "\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,"
          "\"stop_sequence\":null,\"usage\":{\"input_tokens\":460,\"output_tokens\":1}}}")
    EVENT("content_block_start",
          "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
          "\"text\":\"\"}}")
    EVENT("content_block_delta",
          "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
          "\"text\":\"It is sunny in Paris.\"}}")
    EVENT("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}")
    EVENT("message_delta",
          "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
          "\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}")
    EVENT("message_stop", "{\"type\":\"message_stop\"}");

static const char weather_turn[] = TOOL_TURN("weather", "toolu_01NRLabsLyVHZPKxbKvkfSMn");
static const char slow_turn[] = TOOL_TURN("slow", "toolu_slow");
static const char report_turn[] = TOOL_TURN("report", "toolu_report");
static const char freer_turn[] = TOOL_TURN("freer", "toolu_freer");
static const char read_turn[] =
    TOOL_TURN_INPUT("read", "toolu_read", "{\\\"file_path\\\": ", "\\\"notes.txt\\\"}");

static const reply round_trip_replies[] = {
    {"200 OK", SSE, weather_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply cancel_replies[] = {
    {"200 OK", SSE, slow_turn, 0},
    {"200 OK", SSE, slow_turn, 0},
    {"200 OK", SSE, slow_turn, 0},
};
static const reply progress_replies[] = {
    {"200 OK", SSE, report_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply builtin_replies[] = {
    {"200 OK", SSE, read_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply freer_replies[] = {
    {"200 OK", SSE, freer_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply fork_replies[] = {
    {"200 OK", SSE, read_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply parallel_replies[] = {
    {"200 OK", SSE, answer_turn, 0},
    {"200 OK", SSE, answer_turn, 0},
};
/* A response that starts (its usage reported), streams some text, then is overloaded. */
static const char overloaded_mid_stream[] =
    EVENT("message_start",
          "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_o\",\"type\":\"message\","
          "\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"stop_reason\":null,"
          "\"stop_sequence\":null,\"usage\":{\"input_tokens\":120,\"output_tokens\":1}}}")
    EVENT("content_block_start",
          "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
          "\"text\":\"\"}}")
    EVENT("content_block_delta",
          "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
          "\"text\":\"Partial answer.\"}}")
    EVENT("error", "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                   "\"message\":\"Overloaded\"}}");
static const reply overloaded_replies[] = {
    {"200 OK", SSE, overloaded_mid_stream, 0},
    {"200 OK", SSE, answer_turn, 0},
};
static const reply bad_request_replies[] = {
    {"400 Bad Request", "application/json",
     "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
     "\"message\":\"max_tokens: 999999 > 64000, which is the maximum\"}}", 0},
    /* The loopback server writes the content type as a header line: the header after it rides
     * along. */
    {"429 Too Many Requests", "application/json\r\nretry-after: 2",
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}",
     0},
};

/* ---- tools ---- */

static pthread_t driver_thread;
static fl_agent_run *_Atomic driven_run = NULL; /* the run whose tools are running */
static atomic_int weather_calls = 0;
static atomic_int weather_on_driver = 0;

/* "weather" (safe): answers in the callback. */
static void weather(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    weather_calls++;
    if (pthread_equal(pthread_self(), driver_thread)) weather_on_driver++;
    CHECK(text_equals(invocation->tool_name, invocation->tool_name_len, "weather"));
    CHECK(text_equals(invocation->input_json, invocation->input_json_len, "{\"city\":\"Paris\"}"));
    /* From its tool callback, a run cannot be driven again nor freed (the free does nothing). */
    fl_agent_run *run = driven_run;
    CHECK(run != NULL);
    if (run != NULL) {
        fl_agent_next next;
        const char *json;
        size_t len;
        CHECK_STATUS(fl_agent_run_next_event(run, 0, &next, &json, &len), FL_STATUS_INVALID_STATE);
        fl_agent_run_free(run);
        CHECK(strstr(last_error(), "fl_agent_run_next_event is in progress") != NULL);
        /* Nor may the thread driving it run an executor. */
        fl_executor *inner = NULL;
        CHECK_OK(fl_executor_new(NULL, &inner));
        const char *results;
        size_t results_len;
        CHECK_STATUS(fl_executor_run(inner, "[]", 2, NULL, &results, &results_len),
                     FL_STATUS_INVALID_STATE);
        fl_executor_free(inner);
    }
    CHECK_OK(fl_tool_complete(call, "sunny, 21C", 10, false));
}

static atomic_int slow_started = 0;
static atomic_int slow_saw_cancel = 0;

/* "slow": a worker waits until the call is cancelled (hang guard: HANG_GUARD_MS), then
 * completes it, as a real tool stopping its work would. */
static void *slow_worker(void *arg) {
    fl_tool_call *call = arg;
    bool cancelled = false;
    for (int waited = 0; waited < HANG_GUARD_MS && !cancelled; waited++) {
        CHECK_OK(fl_tool_call_cancelled(call, &cancelled));
        if (!cancelled) sleep_ms(1);
    }
    if (cancelled) slow_saw_cancel++;
    /* Reported while the tool winds down: a `tool_progress` event before its `tool_finished`
     * (dropped once the run was freed: accepted either way). */
    CHECK_OK(fl_tool_call_progress(call, "{\"stopping\":true}", 17));
    CHECK_OK(fl_tool_complete(call, "stopped", 7, true));
    return NULL;
}

static void slow(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    slow_started++;
    start_worker(slow_worker, call);
}

/* "report" (safe): reports progress from its callback, then from a worker once the callback
 * has returned; the worker completes the call. */
#define REPORT_FROM_CALLBACK "{\"stage\":\"looking up\",\"city\":\"Paris\"}"
#define REPORT_FROM_WORKER "{\"stage\": \"found\", \"temp_c\": 21.5, \"sources\": [1, 2]}"

static void *report_worker(void *arg) {
    fl_tool_call *call = arg;
    sleep_ms(20); /* well after the callback returned */
    CHECK_OK(fl_tool_call_progress(call, REPORT_FROM_WORKER, strlen(REPORT_FROM_WORKER)));
    CHECK_OK(fl_tool_complete(call, "sunny, 21C", 10, false));
    return NULL;
}

static void report(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    CHECK_OK(fl_tool_call_progress(call, REPORT_FROM_CALLBACK, strlen(REPORT_FROM_CALLBACK)));
    /* Not JSON: refused, nothing is sent. */
    CHECK_STATUS(fl_tool_call_progress(call, "{", 1), FL_STATUS_INVALID_ARGUMENT);
    start_worker(report_worker, call);
}

/* The threads of the clients alive now (each client has one, named "ferroloop-client",
 * which Linux shows cut to 15 characters). A thread already ending is not counted: the kernel
 * lets `pthread_join` return (the thread's id cleared) a moment before the thread leaves
 * /proc/self/task, and a loaded machine showed a joined thread there. Such a thread has
 * PF_EXITING (0x4) in the flags of its stat line; one still running its own code has not, so a
 * free that did not join its thread is still seen. */
static int client_threads(void) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return -1;
    int count = 0;
    struct dirent *task;
    while ((task = readdir(tasks)) != NULL) {
        if (task->d_name[0] == '.') continue;
        char path[300];
        char stat[512] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%.255s/stat", task->d_name);
        FILE *file = fopen(path, "r");
        if (file == NULL) continue; /* the thread has just ended */
        size_t read = fread(stat, 1, sizeof stat - 1, file);
        fclose(file);
        stat[read] = '\0';
        /* "tid (name) state ppid pgrp session tty_nr tpgid flags ..." */
        const char *open = strchr(stat, '(');
        const char *close = strrchr(stat, ')');
        if (open == NULL || close == NULL || close < open) continue;
        char state = 0;
        int ignored[5];
        unsigned flags = 0;
        if (sscanf(close + 1, " %c %d %d %d %d %d %u", &state, &ignored[0], &ignored[1],
                   &ignored[2], &ignored[3], &ignored[4], &flags) != 7) {
            continue;
        }
        if ((flags & 0x4u) != 0) continue; /* PF_EXITING: past its own code, ending */
        if ((size_t)(close - open - 1) >= 15 && strncmp(open + 1, "ferroloop-clien", 15) == 0) {
            count++;
        }
    }
    closedir(tasks);
    return count;
}

/* What "freer" frees: another agent's run (never driven), the agent and its client. The run
 * goes last: it is the client's last owner. */
static fl_client *other_client = NULL;
static fl_agent *other_agent = NULL;
static fl_agent_run *other_run = NULL;
static atomic_int freer_calls = 0;

/* "freer": frees another run, its agent and its client from this run's tool callback. */
static void freer(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    freer_calls++;
    fl_client_free(other_client);
    fl_agent_free(other_agent);
    fl_agent_run_free(other_run);
    other_client = NULL;
    other_agent = NULL;
    other_run = NULL;
    CHECK_OK(fl_tool_complete(call, "freed", 5, false));
}

/* ---- helpers ---- */

static fl_client *new_client(int port) {
    char options[256];
    snprintf(options, sizeof options,
             "{\"from_env\":false,\"api_key\":\"test-key\",\"base_url\":\"http://127.0.0.1:%d\","
             "\"max_retries\":0}",
             port);
    fl_client *client = NULL;
    CHECK_OK(fl_client_new(options, strlen(options), &client));
    return client;
}

static fl_agent *new_agent(fl_client *client, fl_executor *executor) {
    const char *options = "{\"model\":\"claude-test\",\"system\":\"Be brief.\",\"max_turns\":5,"
                          "\"max_tokens\":1024}";
    fl_agent *agent = NULL;
    CHECK_OK(fl_agent_new(client, executor, options, strlen(options), &agent));
    return agent;
}

#define MAX_EVENTS 256

typedef struct {
    char *events[MAX_EVENTS];
    int count;
} event_log;

static void log_free(event_log *log) {
    for (int i = 0; i < log->count; i++) free(log->events[i]);
    log->count = 0;
}

/* Index of the `nth` (from 0) event containing `needle` at or after `from`, or -1. */
static int find_event(const event_log *log, const char *needle, int from) {
    for (int i = from < 0 ? 0 : from; i < log->count; i++) {
        if (strstr(log->events[i], needle) != NULL) return i;
    }
    return -1;
}

/* Reads events into `log` until the end. `on_event` (may be NULL) sees each one as it comes. */
static void drive(fl_agent_run *run, event_log *log,
                  void (*on_event)(fl_agent_run *run, const char *json, void *data), void *data) {
    for (int guard = 0; guard < 10000; guard++) {
        fl_agent_next next = FL_AGENT_NEXT_NONE;
        const char *json = NULL;
        size_t len = 0;
        fl_status status = fl_agent_run_next_event(run, HANG_GUARD_MS, &next, &json, &len);
        CHECK_OK(status);
        if (status != FL_STATUS_OK) return;
        CHECK(json != NULL && json[len] == '\0');
        if (next == FL_AGENT_NEXT_END) {
            CHECK(len == 0);
            return;
        }
        if (next == FL_AGENT_NEXT_NONE) {
            CHECK(!"no event within the hang guard");
            return;
        }
        CHECK(len > 0 && strlen(json) == len);
        if (log->count < MAX_EVENTS) log->events[log->count++] = strdup(json);
        if (on_event != NULL) on_event(run, json, data);
    }
    CHECK(!"too many events");
}

/* ---- scenarios ---- */

static void round_trip(server *s) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    fl_tool_options options = fl_tool_options_default();
    options.concurrency_safe = true;
    const char *definition =
        "{\"name\":\"weather\",\"description\":\"The weather in a city.\","
        "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
        "\"required\":[\"city\"]}}";
    CHECK_OK(fl_executor_add_tool_with_definition(executor, definition, strlen(definition), &options,
                                                  weather, NULL));
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, executor);
    /* The agent keeps what it needs: both may go first. */
    fl_executor_free(executor);
    fl_client_free(client);

    fl_agent_run *run = NULL;
    const char *prompt = "Weather in Paris?";
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    driven_run = run;
    const char *messages = NULL;
    size_t messages_len = 0;
    CHECK_STATUS(fl_agent_run_messages(run, &messages, &messages_len), FL_STATUS_INVALID_STATE);

    event_log log = {0};
    drive(run, &log, NULL, NULL);

    CHECK(weather_calls == 1);
    CHECK(weather_on_driver == 1); /* on the thread calling fl_agent_run_next_event */
    /* In order: turn 1 (its tool, its usage), turn 2, then stop, last. */
    int start1 = find_event(&log, "\"type\":\"turn_start\",\"turn\":1", 0);
    int tool_started = find_event(&log, "\"type\":\"tool_started\"", start1);
    int tool_finished = find_event(&log, "\"type\":\"tool_finished\"", tool_started);
    int usage1 = find_event(&log, "\"type\":\"usage\",\"turn\":1", start1);
    int end1 = find_event(&log, "\"type\":\"turn_end\",\"turn\":1", usage1);
    int start2 = find_event(&log, "\"type\":\"turn_start\",\"turn\":2", end1);
    int text2 = find_event(&log, "\"text\":\"It is sunny in Paris.\"", start2);
    int usage2 = find_event(&log, "\"type\":\"usage\",\"turn\":2", start2);
    int end2 = find_event(&log, "\"type\":\"turn_end\",\"turn\":2", usage2);
    int stop = find_event(&log, "\"type\":\"stop\"", end2);
    CHECK(start1 == 0);
    CHECK(find_event(&log, "\"text\":\"Let me check.\"", start1) > start1);
    CHECK(tool_started > start1 && tool_finished > tool_started && tool_finished < start2);
    CHECK(usage1 > start1 && end1 > usage1 && start2 > end1);
    CHECK(text2 > start2 && usage2 > start2 && end2 > usage2);
    CHECK(stop == log.count - 1);
    CHECK(tool_started >= 0 &&
          strstr(log.events[tool_started], "\"tool_use_id\":\"toolu_01NRLabsLyVHZPKxbKvkfSMn\"") != NULL);
    CHECK(tool_finished >= 0 && strstr(log.events[tool_finished], "\"status\":\"succeeded\"") != NULL);
    CHECK(usage1 >= 0 && strstr(log.events[usage1], "\"input_tokens\":377") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"reason\":\"end_turn\"") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"error_code\":null") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"turns\":2,\"tool_calls\":1") != NULL);
    /* The end is reported again. */
    fl_agent_next next = FL_AGENT_NEXT_EVENT;
    const char *json = NULL;
    size_t len = 1;
    CHECK_OK(fl_agent_run_next_event(run, 0, &next, &json, &len));
    CHECK(next == FL_AGENT_NEXT_END && len == 0);

    /* The final history: prompt, tool call, tool result, answer. */
    CHECK_OK(fl_agent_run_messages(run, &messages, &messages_len));
    CHECK(messages != NULL && messages[messages_len] == '\0');
    CHECK(messages != NULL && strstr(messages, "\"content\":\"sunny, 21C\"") != NULL);
    CHECK(messages != NULL && strstr(messages, "It is sunny in Paris.") != NULL);
    CHECK(messages != NULL && messages[0] == '[');

    driven_run = NULL;
    fl_agent_run_free(run);
    fl_agent_free(agent);
    log_free(&log);

    char *requests = stop_server(s);
    const char *each[4] = {NULL, NULL, NULL, NULL};
    CHECK(split_requests(requests, each, 4) == 2);
    const char *first = each[0];
    const char *second = each[1];
    CHECK(first != NULL && strncmp(first, "POST /v1/messages HTTP/1.1\r\n", 28) == 0);
    CHECK(first != NULL && strstr(first, "x-api-key: test-key") != NULL);
    CHECK(first != NULL && strstr(first, "\"model\":\"claude-test\"") != NULL);
    CHECK(first != NULL && strstr(first, "\"stream\":true") != NULL);
    /* The tool as the model sees it: its definition. */
    CHECK(first != NULL && strstr(first, "\"description\":\"The weather in a city.\"") != NULL);
    CHECK(first != NULL && strstr(first, "\"input_schema\":{") != NULL);
    CHECK(first != NULL && strstr(first, "\"properties\":{\"city\":{\"type\":\"string\"}}") != NULL);
    CHECK(first != NULL && strstr(first, "\"required\":[\"city\"]") != NULL);
    CHECK(first != NULL && strstr(first, "\"name\":\"weather\"") != NULL);
    CHECK(first != NULL && strstr(first, "Weather in Paris?") != NULL);
    CHECK(first != NULL && strstr(first, "\"type\":\"tool_result\"") == NULL);
    /* The tool's result went back to the model in the second request. */
    CHECK(second != NULL && strstr(second, "\"type\":\"tool_result\"") != NULL);
    CHECK(second != NULL && strstr(second, "\"tool_use_id\":\"toolu_01NRLabsLyVHZPKxbKvkfSMn\"") != NULL);
    CHECK(second != NULL && strstr(second, "sunny, 21C") != NULL);
    free(requests);
}

/* A tool's progress: `tool_progress` events with its data (written compactly), in order, between
 * the call's `tool_started` and `tool_finished`. */
static void progress(server *s) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    fl_tool_options options = fl_tool_options_default();
    options.concurrency_safe = true;
    CHECK_OK(fl_executor_add_tool(executor, "report", 6, &options, report, NULL));
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, executor);
    fl_agent_run *run = NULL;
    const char *prompt = "Weather in Paris?";
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    join_workers();

    int started = find_event(&log, "\"type\":\"tool_started\"", 0);
    int first = find_event(&log, "\"type\":\"tool_progress\"", 0);
    int second = find_event(&log, "\"type\":\"tool_progress\"", first + 1);
    int finished = find_event(&log, "\"type\":\"tool_finished\"", 0);
    CHECK(started >= 0 && first > started && second > first && finished > second);
    CHECK(find_event(&log, "\"type\":\"tool_progress\"", second + 1) == -1);
    CHECK(first >= 0 && strcmp(log.events[first],
                               "{\"type\":\"tool_progress\",\"tool_use_id\":\"toolu_report\","
                               "\"data\":" REPORT_FROM_CALLBACK "}") == 0);
    CHECK(second >= 0 && strcmp(log.events[second],
                                "{\"type\":\"tool_progress\",\"tool_use_id\":\"toolu_report\","
                                "\"data\":{\"stage\":\"found\",\"temp_c\":21.5,"
                                "\"sources\":[1,2]}}") == 0);
    CHECK(finished >= 0 && strstr(log.events[finished], "\"status\":\"succeeded\"") != NULL);
    CHECK(log.count > 0 && strstr(log.events[log.count - 1], "\"reason\":\"end_turn\"") != NULL);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    fl_client_free(client);
    fl_executor_free(executor);
    log_free(&log);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2);
    /* Progress is for the host: the model sees the result only. */
    CHECK(strstr(each[1], "sunny, 21C") != NULL && strstr(each[1], "looking up") == NULL);
    free(requests);
}

/* Cancels the run (or its token) once its tool has started. */
typedef struct {
    fl_cancel_token *token; /* NULL: fl_agent_run_cancel */
    int cancelled;
} canceller;

static void cancel_on_tool_start(fl_agent_run *run, const char *json, void *data) {
    canceller *c = data;
    if (strstr(json, "\"type\":\"tool_started\"") != NULL && !c->cancelled) {
        c->cancelled = 1;
        if (c->token != NULL) {
            CHECK_OK(fl_cancel_token_cancel(c->token));
        } else {
            CHECK_OK(fl_agent_run_cancel(run));
        }
    }
}

static void cancellation(server *s) {
    /* A cancelled call ends when its tool completes it, unless the cleanup grace runs out
     * first: a grace as long as the hang guard keeps it a guard. */
    fl_executor_options executor_options = fl_executor_options_default();
    executor_options.cleanup_grace_ms = HANG_GUARD_MS;
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(&executor_options, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "slow", 4, NULL, slow, NULL));
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, executor);
    const char *prompt = "Take your time.";

    /* 1: fl_agent_run_cancel while the tool blocks; 2: the run's cancel token. */
    for (int with_token = 0; with_token < 2; with_token++) {
        int started_before = slow_started, saw_before = slow_saw_cancel;
        canceller c = {NULL, 0};
        if (with_token) CHECK_OK(fl_cancel_token_new(&c.token));
        fl_agent_run *run = NULL;
        CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), c.token, &run));
        event_log log = {0};
        drive(run, &log, cancel_on_tool_start, &c);
        CHECK(c.cancelled == 1);
        CHECK(slow_started == started_before + 1);
        int finished = find_event(&log, "\"type\":\"tool_finished\"", 0);
        int stop = find_event(&log, "\"type\":\"stop\"", 0);
        CHECK(finished >= 0 && strstr(log.events[finished], "\"status\":\"cancelled\"") != NULL);
        /* The progress the tool reported once cancelled, before it completed the call. */
        int stopping = find_event(&log, "\"type\":\"tool_progress\"", 0);
        CHECK(stopping >= 0 && stopping < finished &&
              strcmp(log.events[stopping], "{\"type\":\"tool_progress\",\"tool_use_id\":"
                                           "\"toolu_slow\",\"data\":{\"stopping\":true}}") == 0);
        CHECK(stop == log.count - 1 && stop > finished);
        CHECK(stop >= 0 && strstr(log.events[stop], "\"reason\":\"aborted\"") != NULL);
        /* The history stays valid for the API: the call is answered. */
        const char *messages = NULL;
        size_t messages_len = 0;
        CHECK_OK(fl_agent_run_messages(run, &messages, &messages_len));
        CHECK(messages != NULL && strstr(messages, "\"tool_use_id\":\"toolu_slow\"") != NULL);
        CHECK(messages != NULL && strstr(messages, "\"type\":\"tool_result\"") != NULL);
        fl_agent_run_free(run);
        fl_cancel_token_free(c.token);
        join_workers();
        CHECK(slow_saw_cancel == saw_before + 1);
        log_free(&log);
    }

    /* 3: freed while the tool blocks, without a cancel: the tool sees the cancellation. */
    int saw_before = slow_saw_cancel;
    fl_agent_run *run = NULL;
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    int started_before = slow_started;
    for (int guard = 0; guard < 10000 && slow_started == started_before; guard++) {
        fl_agent_next next;
        const char *json;
        size_t len;
        CHECK_OK(fl_agent_run_next_event(run, HANG_GUARD_MS, &next, &json, &len));
        if (next != FL_AGENT_NEXT_EVENT) break;
    }
    CHECK(slow_started == started_before + 1);
    fl_agent_run_free(run);
    join_workers();
    CHECK(slow_saw_cancel == saw_before + 1);

    fl_agent_free(agent);
    fl_client_free(client);
    fl_executor_free(executor);
    char *requests = stop_server(s);
    const char *each[4];
    CHECK(split_requests(requests, each, 4) == 3);
    free(requests);
}

/* A workspace for the `read` built-in: a fresh directory `dir` (a mkdtemp template) holding
 * notes.txt, whose path is written to `path`; the test removes both. */
static void make_workspace(char *dir, char *path, size_t path_len) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, path_len, "%s/notes.txt", dir);
    FILE *file = fopen(path, "w");
    CHECK(file != NULL);
    if (file != NULL) {
        fputs("the secret is 42\n", file);
        fclose(file);
    }
}

/* A built-in tool (`read`, confined to a workspace) runs in the loop beside the C tools. */
static void builtin_tool(server *s) {
    char dir[] = "/tmp/ferroloop-test-agent-XXXXXX";
    char path[256];
    make_workspace(dir, path, sizeof path);
    fl_client *client = new_client(s->port);
    char options[512];
    snprintf(options, sizeof options,
             "{\"model\":\"claude-test\",\"builtin_tools\":[\"read\"],\"workspace\":\"%s\"}", dir);
    fl_agent *agent = NULL;
    CHECK_OK(fl_agent_new(client, NULL, options, strlen(options), &agent));
    const char *definitions = NULL;
    size_t definitions_len = 0;
    CHECK_OK(fl_agent_tool_definitions(agent, &definitions, &definitions_len));
    CHECK(definitions != NULL && strncmp(definitions, "[{", 2) == 0 &&
          strstr(definitions, "\"name\":\"read\"") != NULL);
    fl_agent_run *run = NULL;
    const char *prompt = "What is the secret?";
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    int finished = find_event(&log, "\"type\":\"tool_finished\"", 0);
    CHECK(finished >= 0 && strstr(log.events[finished], "\"name\":\"read\"") != NULL);
    CHECK(finished >= 0 && strstr(log.events[finished], "\"status\":\"succeeded\"") != NULL);
    CHECK(log.count > 0 && strstr(log.events[log.count - 1], "\"reason\":\"end_turn\"") != NULL);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    fl_client_free(client);
    log_free(&log);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2);
    CHECK(strstr(each[1], "\"tool_use_id\":\"toolu_read\"") != NULL);
    CHECK(strstr(each[1], "the secret is 42") != NULL);
    free(requests);
    unlink(path);
    rmdir(dir);
}

/* "done" (safe): answers in the callback. */
static void done(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    (void)invocation;
    CHECK_OK(fl_tool_complete(call, "done", 4, false));
}

/* In a child forked while a built-in tool's worker thread is alive: the executor and the turn
 * made before the fork still run their C tools (on the calling thread), and freeing a run, a
 * turn, an executor, an agent and a client made before the fork returns at once. Returns the
 * number of failed checks (the child's exit status). */
static int forked_child_frees(fl_client *client, fl_agent *agent, fl_agent_run *run,
                              fl_executor *executor, fl_turn *turn) {
    int failures = 0;
    const char *call = "[{\"type\":\"tool_use\",\"id\":\"toolu_c\",\"name\":\"done\",\"input\":{}}]";
    const char *results = NULL;
    size_t results_len = 0;
    if (fl_executor_run(executor, call, strlen(call), NULL, &results, &results_len) != FL_STATUS_OK ||
        results == NULL || strstr(results, "\"content\":\"done\"") == NULL) {
        fprintf(stderr, "child: executor_run: %s\n", last_error());
        failures++;
    }
    const char *submitted = "{\"type\":\"tool_use\",\"id\":\"toolu_t\",\"name\":\"done\",\"input\":{}}";
    int ended = 0;
    if (fl_turn_submit(turn, submitted, strlen(submitted)) == FL_STATUS_OK &&
        fl_turn_seal(turn) == FL_STATUS_OK) {
        for (int guard = 0; guard < 100 && !ended; guard++) {
            fl_turn_event event;
            if (fl_turn_next_event(turn, HANG_GUARD_MS, &event) != FL_STATUS_OK) break;
            ended = event.kind == FL_TURN_EVENT_END;
        }
    }
    if (!ended || fl_turn_results(turn, &results, &results_len) != FL_STATUS_OK ||
        strstr(results, "\"content\":\"done\"") == NULL) {
        fprintf(stderr, "child: turn: %s\n", last_error());
        failures++;
    }
    fl_agent_run_free(run); /* its runtime's blocking pool had the read's worker at the fork */
    fl_turn_free(turn);
    fl_executor_free(executor);
    fl_agent_free(agent);
    fl_client_free(client);
    return failures;
}

static void freed_in_forked_child(server *s) {
    char dir[] = "/tmp/ferroloop-test-agent-XXXXXX";
    char path[256];
    make_workspace(dir, path, sizeof path);
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    fl_tool_options tool_options = fl_tool_options_default();
    tool_options.concurrency_safe = true;
    CHECK_OK(fl_executor_add_tool(executor, "done", 4, &tool_options, done, NULL));
    fl_turn *turn = NULL;
    CHECK_OK(fl_turn_new(executor, NULL, &turn));
    fl_client *client = new_client(s->port);
    char options[512];
    snprintf(options, sizeof options,
             "{\"model\":\"claude-test\",\"builtin_tools\":[\"read\"],\"workspace\":\"%s\"}", dir);
    fl_agent *agent = NULL;
    CHECK_OK(fl_agent_new(client, executor, options, strlen(options), &agent));
    fl_agent_run *run = NULL;
    const char *prompt = "What is the secret?";
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    /* The read ran on a worker thread of the run's blocking pool, which stays alive for a
     * while after its job (about 10 s): the fork comes well within that. */
    CHECK(find_event(&log, "\"status\":\"succeeded\"", 0) >= 0);
    log_free(&log);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        int failures = forked_child_frees(client, agent, run, executor, turn);
        /* Exits through exec: at an exit, valgrind would count what the child keeps of the
         * parent's threads (never joined here) as possibly lost; no finding of this test. */
        execl("/bin/sh", "sh", "-c", failures == 0 ? "exit 0" : "exit 1", (char *)NULL);
        _exit(2);
    }
    CHECK(child > 0);
    /* A hang guard shorter than HANG_GUARD_MS: a hung free waits forever. */
    CHECK(child_exited_cleanly(child, 20000));
    /* The parent's handles are untouched by the child. */
    fl_agent_run_free(run);
    fl_turn_free(turn);
    fl_executor_free(executor);
    fl_agent_free(agent);
    fl_client_free(client);
    char *requests = stop_server(s);
    free(requests);
    unlink(path);
    rmdir(dir);
}

/* Two runs of one agent (one client, one connection pool), each driven on its own thread. */
typedef struct {
    fl_agent *agent;
    int ended; /* the run ended with end_turn and the answer */
} parallel_run;

static void *drive_parallel(void *arg) {
    parallel_run *job = arg;
    fl_agent_run *run = NULL;
    const char *prompt = "Weather?";
    CHECK_OK(fl_agent_run_start_prompt(job->agent, prompt, strlen(prompt), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    job->ended = find_event(&log, "\"text\":\"It is sunny in Paris.\"", 0) >= 0 && log.count > 0 &&
                 strstr(log.events[log.count - 1], "\"reason\":\"end_turn\"") != NULL;
    fl_agent_run_free(run);
    log_free(&log);
    return NULL;
}

static void parallel(server *s) {
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, NULL);
    parallel_run jobs[2] = {{agent, 0}, {agent, 0}};
    start_worker(drive_parallel, &jobs[0]);
    start_worker(drive_parallel, &jobs[1]);
    join_workers();
    CHECK(jobs[0].ended && jobs[1].ended);
    fl_agent_free(agent);
    fl_client_free(client);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2);
    free(requests);
}

/* A tool callback of one run frees another run, its agent and its client (the run was the
 * client's last owner): the client's thread is stopped and joined before the call driving the
 * first run returns (it was left to stop on its own, unjoined: a process ending soon after saw
 * it still running, and valgrind its thread-local memory lost). */
static void free_from_another_runs_callback(server *s) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new(NULL, &executor));
    CHECK_OK(fl_executor_add_tool(executor, "freer", 5, NULL, freer, NULL));
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, executor);
    other_client = new_client(s->port);
    other_agent = new_agent(other_client, NULL);
    const char *prompt = "Free the others.";
    CHECK_OK(fl_agent_run_start_prompt(other_agent, prompt, strlen(prompt), NULL, &other_run));
    fl_agent_run *run = NULL;
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    int after_free = -1; /* client threads when the call that ran "freer" returned */
    event_log log = {0};
    for (int guard = 0; guard < 10000; guard++) {
        fl_agent_next next = FL_AGENT_NEXT_NONE;
        const char *json = NULL;
        size_t len = 0;
        CHECK_OK(fl_agent_run_next_event(run, HANG_GUARD_MS, &next, &json, &len));
        if (freer_calls == 1 && after_free < 0) after_free = client_threads();
        if (next != FL_AGENT_NEXT_EVENT) break;
        /* The agent is freed mid-run (after the run's first event): the run goes on. */
        if (log.count == 0) {
            fl_agent_free(agent);
            agent = NULL;
        }
        if (log.count < MAX_EVENTS) log.events[log.count++] = strdup(json);
    }
    CHECK(freer_calls == 1);
    CHECK(after_free == 1); /* this run's client only */
    if (after_free != 1) fprintf(stderr, "    client threads after the free: %d\n", after_free);
    CHECK(log.count > 0 && strstr(log.events[log.count - 1], "\"reason\":\"end_turn\"") != NULL);
    int finished = find_event(&log, "\"type\":\"tool_finished\"", 0);
    CHECK(finished >= 0 && strstr(log.events[finished], "\"status\":\"succeeded\"") != NULL);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    fl_client_free(client);
    fl_executor_free(executor);
    CHECK(client_threads() == 0);
    log_free(&log);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2); /* the other run made none */
    free(requests);
}

static void bad_request(server *s) {
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, NULL);
    fl_client_free(client);
    const char *messages_in = "[{\"role\":\"user\",\"content\":\"Hi\"}]";
    fl_agent_run *run = NULL;
    CHECK_OK(fl_agent_run_start(agent, messages_in, strlen(messages_in), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    /* turn_start, turn_end (no stop reason: the call failed), stop. */
    CHECK(log.count == 3);
    CHECK(find_event(&log, "\"type\":\"turn_start\"", 0) == 0);
    CHECK(find_event(&log, "\"type\":\"turn_end\",\"turn\":1,\"stop_reason\":null", 0) == 1);
    int stop = find_event(&log, "\"type\":\"stop\"", 0);
    CHECK(stop == log.count - 1);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"reason\":\"error\"") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"error_code\":\"invalid_request\"") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "max_tokens: 999999 > 64000") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "req_test_0") != NULL); /* the request id */
    /* What the client knew of the failed call: its status and request id, no wait asked. */
    CHECK(stop >= 0 && strstr(log.events[stop], "\"status\":400,\"request_id\":\"req_test_0\","
                                                 "\"retry_after\":null") != NULL);
    CHECK(find_event(&log, "\"type\":\"usage\"", 0) == -1); /* nothing billed */
    fl_agent_run_free(run);
    log_free(&log);

    /* A 429 (the client makes no retries here): the wait its `retry-after` asked for, in ms. */
    CHECK_OK(fl_agent_run_start(agent, messages_in, strlen(messages_in), NULL, &run));
    event_log limited = {0};
    drive(run, &limited, NULL, NULL);
    stop = find_event(&limited, "\"type\":\"stop\"", 0);
    CHECK(stop >= 0 && stop == limited.count - 1);
    CHECK(stop >= 0 && strstr(limited.events[stop], "\"error_code\":\"rate_limited\"") != NULL);
    CHECK(stop >= 0 && strstr(limited.events[stop], "\"status\":429,\"request_id\":\"req_test_1\","
                                                     "\"retry_after\":2000.0") != NULL);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    log_free(&limited);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2);
    free(requests);
}

/* An overload announced mid-stream cannot be retried by the client (the response had
 * started); without a fallback model the loop asks the turn again once, as Python and Node
 * see it (the core's rule). */
static void overloaded_mid_stream_retried(server *s) {
    fl_client *client = new_client(s->port);
    fl_agent *agent = new_agent(client, NULL);
    fl_client_free(client);
    fl_agent_run *run = NULL;
    const char *prompt = "Weather in Paris?";
    CHECK_OK(fl_agent_run_start_prompt(agent, prompt, strlen(prompt), NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    int first = find_event(&log, "\"type\":\"turn_start\",\"turn\":1,", 0);
    int again = find_event(&log, "\"type\":\"turn_start\",\"turn\":1,", first + 1);
    CHECK(first >= 0 && again > first);
    CHECK(find_event(&log, "\"type\":\"turn_start\",\"turn\":2", 0) == -1);
    /* Both calls were billed: one usage event each (120 then 460 input tokens). */
    int usage = find_event(&log, "\"type\":\"usage\"", 0);
    CHECK(usage > first && usage < again);
    CHECK(usage >= 0 && strstr(log.events[usage], "\"input_tokens\":120") != NULL);
    CHECK(find_event(&log, "\"type\":\"usage\"", again) > again);
    int stop = find_event(&log, "\"type\":\"stop\"", 0);
    CHECK(stop == log.count - 1);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"reason\":\"end_turn\"") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "\"turns\":1") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "It is sunny in Paris.") != NULL);
    CHECK(stop >= 0 && strstr(log.events[stop], "Partial answer.") == NULL);
    fl_agent_run_free(run);
    fl_agent_free(agent);
    log_free(&log);
    char *requests = stop_server(s);
    const char *each[3];
    CHECK(split_requests(requests, each, 3) == 2);
    free(requests);
}

static void misuse(void) {
    fl_client *client = NULL;
    const char *unknown = "{\"from_env\":false,\"max_retrys\":2}";
    CHECK_STATUS(fl_client_new(unknown, strlen(unknown), &client), FL_STATUS_INVALID_ARGUMENT);
    CHECK(client == NULL);
    CHECK(strstr(last_error(), "unknown client option \"max_retrys\"") != NULL);
    const char *wrong = "{\"max_retries\":\"2\"}";
    CHECK_STATUS(fl_client_new(wrong, strlen(wrong), &client), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "\"max_retries\" must be a non-negative integer") != NULL);
    const char *provider = "{\"provider\":\"gemini\"}";
    CHECK_STATUS(fl_client_new(provider, strlen(provider), &client), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_client_new(NULL, 0, NULL), FL_STATUS_NULL_ARGUMENT);
    const char *options = "{\"from_env\":false,\"base_url\":\"http://127.0.0.1:9\"}";
    CHECK_OK(fl_client_new(options, strlen(options), &client));

    fl_agent *agent = NULL;
    CHECK_STATUS(fl_agent_new(NULL, NULL, "{}", 2, &agent), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_agent_new(client, NULL, "{}", 2, &agent), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "\"model\" is required") != NULL);
    const char *bad_turns = "{\"model\":\"m\",\"max_turns\":-1}";
    CHECK_STATUS(fl_agent_new(client, NULL, bad_turns, strlen(bad_turns), &agent),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "\"max_turns\"") != NULL);
    const char *bad_key = "{\"model\":\"m\",\"maxTurns\":3}";
    CHECK_STATUS(fl_agent_new(client, NULL, bad_key, strlen(bad_key), &agent),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "unknown agent option \"maxTurns\"") != NULL);
    /* The core's configuration check, before only at a run's start (a stop with
     * `invalid_configuration`), as in Python and Node. */
    const char *refused[][2] = {
        {"{\"model\":\"\"}", "the model name is empty"},
        {"{\"model\":\" \\n\"}", "the model name is empty"},
        {"{\"model\":\"m\",\"fallback_model\":\"\"}", "the fallback model name is empty"},
        {"{\"model\":\"m\",\"max_tokens\":4096,"
         "\"extra\":{\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4096}}}",
         "max_tokens (4096) must be greater"},
        {"{\"model\":\"m\",\"max_tokens\":0}", "max_tokens is 0"},
        /* The tools' check too (Agent::check_tools): a tool_choice naming no tool. */
        {"{\"model\":\"m\",\"builtin_tools\":[\"read\"],"
         "\"extra\":{\"tool_choice\":{\"type\":\"tool\",\"name\":\"write\"}}}",
         "tool_choice"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECK_STATUS(fl_agent_new(client, NULL, refused[i][0], strlen(refused[i][0]), &agent),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(strncmp(last_error(), "invalid agent configuration: ", 29) == 0);
        CHECK(strstr(last_error(), refused[i][1]) != NULL);
        CHECK(agent == NULL);
    }
    CHECK(agent == NULL);
    const char *good = "{\"model\":\"m\"}";
    CHECK_OK(fl_agent_new(client, NULL, good, strlen(good), &agent));

    fl_agent_run *run = NULL;
    CHECK_STATUS(fl_agent_run_start(agent, "{}", 2, NULL, &run), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_agent_run_start(agent, "[", 1, NULL, &run), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_agent_run_start(agent, "\xff", 1, NULL, &run), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_agent_run_start(NULL, "[]", 2, NULL, &run), FL_STATUS_NULL_ARGUMENT);
    CHECK(run == NULL);
    /* A conversation the API would refuse makes no request: the run stops at once. */
    CHECK_OK(fl_agent_run_start(agent, "[]", 2, NULL, &run));
    event_log log = {0};
    drive(run, &log, NULL, NULL);
    CHECK(log.count == 1 && strstr(log.events[0], "\"error_code\":\"invalid_history\"") != NULL);
    CHECK_STATUS(fl_agent_run_next_event(run, 0, NULL, NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_agent_run_cancel(NULL), FL_STATUS_NULL_ARGUMENT);
    fl_agent_run_free(run);
    log_free(&log);
    fl_agent_run_free(NULL);
    fl_agent_free(agent);
    fl_agent_free(NULL);
    fl_client_free(client);
    fl_client_free(NULL);
}

int main(void) {
    /* The servers are forked before the library starts any thread. */
    server round_trip_server = start_server(round_trip_replies, 2);
    server cancel_server = start_server(cancel_replies, 3);
    server progress_server = start_server(progress_replies, 2);
    server builtin_server = start_server(builtin_replies, 2);
    server fork_server = start_server(fork_replies, 2);
    server parallel_server = start_server(parallel_replies, 2);
    server freer_server = start_server(freer_replies, 2);
    server bad_request_server = start_server(bad_request_replies, 2);
    server overloaded_server = start_server(overloaded_replies, 2);
    driver_thread = pthread_self();

    round_trip(&round_trip_server);
    cancellation(&cancel_server);
    progress(&progress_server);
    builtin_tool(&builtin_server);
    freed_in_forked_child(&fork_server);
    parallel(&parallel_server);
    free_from_another_runs_callback(&freer_server);
    bad_request(&bad_request_server);
    overloaded_mid_stream_retried(&overloaded_server);
    misuse();
    return check_summary("test_agent");
}
