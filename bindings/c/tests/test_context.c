/*
 * Context budgeting through the C API: the thresholds of fl_context_budget (Claude Code's
 * defaults, the small-window scaling, overrides, the percentage override, the model table) and
 * the state at and around every threshold, with the values the Python and Node tests expect;
 * fl_context_tracker's usage anchoring (exact, usage+estimate, estimate); bad arguments.
 *
 * Usage: test_context
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>

#include "check.h"

static fl_context_budget *budget_new(uint64_t window, uint64_t max_output,
                                     const fl_context_budget_options *options) {
    fl_context_budget *budget = NULL;
    CHECK_OK(fl_context_budget_new(window, max_output, options, &budget));
    return budget;
}

static fl_context_thresholds thresholds_of(const fl_context_budget *budget) {
    fl_context_thresholds t;
    memset(&t, 0xab, sizeof t);
    CHECK_OK(fl_context_budget_thresholds(budget, &t));
    return t;
}

static fl_context_state state_of(const fl_context_budget *budget, uint64_t tokens) {
    fl_context_state state = (fl_context_state)99;
    CHECK_OK(fl_context_budget_state(budget, tokens, &state));
    return state;
}

/* The state of `tokens` from the thresholds: the most urgent one reached. */
static fl_context_state expected_state(fl_context_thresholds t, uint64_t tokens) {
    return tokens >= t.blocking      ? FL_CONTEXT_BLOCKING
           : tokens >= t.autocompact ? FL_CONTEXT_AUTO_COMPACT
           : tokens >= t.warning     ? FL_CONTEXT_WARNING
                                     : FL_CONTEXT_OK;
}

/* The state just below, at and just above each threshold. */
static void check_boundaries(const fl_context_budget *budget) {
    fl_context_thresholds t = thresholds_of(budget);
    CHECK(t.warning <= t.autocompact && t.autocompact <= t.blocking);
    uint64_t at[] = {0, t.warning, t.autocompact, t.blocking, UINT64_MAX};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        for (int delta = -1; delta <= 1; delta++) {
            if ((delta < 0 && at[i] == 0) || (delta > 0 && at[i] == UINT64_MAX)) {
                continue;
            }
            uint64_t tokens = at[i] + (uint64_t)(int64_t)delta;
            fl_context_state got = state_of(budget, tokens);
            CHECK(got == expected_state(t, tokens));
            if (got != expected_state(t, tokens)) {
                fprintf(stderr, "    %llu tokens: state %d\n", (unsigned long long)tokens, (int)got);
            }
        }
    }
    /* Each state begins exactly at its threshold. */
    if (t.warning > 0 && t.warning < t.autocompact) {
        CHECK(state_of(budget, t.warning - 1) == FL_CONTEXT_OK);
        CHECK(state_of(budget, t.warning) == FL_CONTEXT_WARNING);
    }
    if (t.autocompact > 0 && t.autocompact < t.blocking) {
        CHECK(state_of(budget, t.autocompact - 1) != FL_CONTEXT_AUTO_COMPACT);
        CHECK(state_of(budget, t.autocompact) == FL_CONTEXT_AUTO_COMPACT);
    }
    if (t.blocking > 0) {
        CHECK(state_of(budget, t.blocking - 1) != FL_CONTEXT_BLOCKING);
    }
    CHECK(state_of(budget, t.blocking) == FL_CONTEXT_BLOCKING);
}

static void check_budget_defaults(void) {
    /* The values are part of the ABI. */
    CHECK(FL_CONTEXT_OK == 0 && FL_CONTEXT_WARNING == 1 && FL_CONTEXT_AUTO_COMPACT == 2 &&
          FL_CONTEXT_BLOCKING == 3);

    /* Claude Code's thresholds (python/tests/test_tokens.py, node/test/tokens.test.js). */
    fl_context_budget *budget = budget_new(200000, 32000, NULL);
    fl_context_thresholds t = thresholds_of(budget);
    CHECK(t.window == 200000 && t.max_output_tokens == 32000);
    CHECK(t.effective_window == 180000);
    CHECK(t.autocompact == 167000 && t.warning == 147000 && t.blocking == 177000);
    CHECK(state_of(budget, 0) == FL_CONTEXT_OK);
    CHECK(state_of(budget, 100000) == FL_CONTEXT_OK);
    CHECK(state_of(budget, 146999) == FL_CONTEXT_OK);
    CHECK(state_of(budget, 147000) == FL_CONTEXT_WARNING);
    CHECK(state_of(budget, 150000) == FL_CONTEXT_WARNING);
    CHECK(state_of(budget, 166999) == FL_CONTEXT_WARNING);
    CHECK(state_of(budget, 167000) == FL_CONTEXT_AUTO_COMPACT);
    CHECK(state_of(budget, 170000) == FL_CONTEXT_AUTO_COMPACT);
    CHECK(state_of(budget, 176999) == FL_CONTEXT_AUTO_COMPACT);
    CHECK(state_of(budget, 177000) == FL_CONTEXT_BLOCKING);
    CHECK(state_of(budget, 178000) == FL_CONTEXT_BLOCKING);
    check_boundaries(budget);
    double percent = -1;
    CHECK_OK(fl_context_budget_percent_left(budget, 0, &percent));
    CHECK(percent == 100.0);
    CHECK_OK(fl_context_budget_percent_left(budget, 100000, &percent));
    CHECK(percent > 0 && percent < 100);
    CHECK_OK(fl_context_budget_percent_left(budget, 167000, &percent));
    CHECK(percent == 0.0);
    CHECK_OK(fl_context_budget_percent_left(budget, UINT64_MAX, &percent));
    CHECK(percent == 0.0);
    fl_context_budget_free(budget);

    /* A small max output reserves only itself. */
    budget = budget_new(200000, 8192, NULL);
    CHECK(thresholds_of(budget).effective_window == 191808);
    fl_context_budget_free(budget);

    /* The default options are no options: small windows keep their scaled buffers (gpt-4's
     * 8,192 tokens would otherwise block at 0). */
    fl_context_budget_options defaults = fl_context_budget_options_default();
    CHECK(defaults.output_reserve_cap == FL_CONTEXT_BUDGET_DEFAULT);
    CHECK(defaults.autocompact_buffer == FL_CONTEXT_BUDGET_DEFAULT);
    CHECK(defaults.warning_buffer == FL_CONTEXT_BUDGET_DEFAULT);
    CHECK(defaults.blocking_buffer == FL_CONTEXT_BUDGET_DEFAULT);
    CHECK(defaults.autocompact_percent == 0.0);
    uint64_t windows[][2] = {{8192, 8192}, {16385, 4096}, {200000, 32000}, {106000, 20000},
                             {105999, 64000}, {1000, 100}, {1, 1}, {0, 0}, {UINT64_MAX, UINT64_MAX}};
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
        fl_context_budget *plain = budget_new(windows[i][0], windows[i][1], NULL);
        fl_context_budget *with_defaults = budget_new(windows[i][0], windows[i][1], &defaults);
        fl_context_thresholds a = thresholds_of(plain), b = thresholds_of(with_defaults);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK(a.blocking <= a.effective_window && a.effective_window <= a.window);
        check_boundaries(plain);
        fl_context_budget_free(plain);
        fl_context_budget_free(with_defaults);
    }
    /* gpt-4: the reserve and the buffers take half the window, every state is reachable. */
    budget = budget_new(8192, 8192, NULL);
    t = thresholds_of(budget);
    CHECK(t.effective_window == 7378 && t.autocompact == 6085 && t.warning == 4096 &&
          t.blocking == 7080);
    CHECK(state_of(budget, 0) == FL_CONTEXT_OK);
    fl_context_budget_free(budget);
    /* A window of 0: everything blocks, the percentage left is 0. */
    budget = budget_new(0, 0, NULL);
    CHECK(state_of(budget, 0) == FL_CONTEXT_BLOCKING);
    CHECK_OK(fl_context_budget_percent_left(budget, 0, &percent));
    CHECK(percent == 0.0);
    fl_context_budget_free(budget);
}

static void check_budget_overrides(void) {
    /* python: ContextBudget(200_000, 8_000, autocompact_buffer=50_000). */
    fl_context_budget_options options = fl_context_budget_options_default();
    options.autocompact_buffer = 50000;
    fl_context_budget *budget = budget_new(200000, 8000, &options);
    CHECK(thresholds_of(budget).autocompact == 192000 - 50000);
    check_boundaries(budget);
    fl_context_budget_free(budget);

    /* node: { window: 100_000, maxOutputTokens: 8_000, autocompactBuffer: 5_000,
     * blockingBuffer: 1_000 }. */
    options = fl_context_budget_options_default();
    options.autocompact_buffer = 5000;
    options.blocking_buffer = 1000;
    budget = budget_new(100000, 8000, &options);
    fl_context_thresholds t = thresholds_of(budget);
    CHECK(t.effective_window == 92000 && t.autocompact == 87000 && t.blocking == 91000);
    CHECK(t.warning == 67000);
    check_boundaries(budget);
    fl_context_budget_free(budget);

    /* Every field at once, including 0 (a real value, not "default"). */
    options.output_reserve_cap = 0;
    options.autocompact_buffer = 0;
    options.warning_buffer = 0;
    options.blocking_buffer = 0;
    budget = budget_new(1000, 500, &options);
    t = thresholds_of(budget);
    CHECK(t.effective_window == 1000 && t.autocompact == 1000 && t.warning == 1000 &&
          t.blocking == 1000);
    CHECK(state_of(budget, 999) == FL_CONTEXT_OK);
    CHECK(state_of(budget, 1000) == FL_CONTEXT_BLOCKING);
    fl_context_budget_free(budget);

    /* Absurd buffers saturate instead of overflowing. */
    options = fl_context_budget_options_default();
    options.output_reserve_cap = UINT64_MAX - 1;
    options.autocompact_buffer = UINT64_MAX - 1;
    options.warning_buffer = UINT64_MAX - 1;
    options.blocking_buffer = UINT64_MAX - 1;
    budget = budget_new(UINT64_MAX, UINT64_MAX, &options);
    t = thresholds_of(budget);
    CHECK(t.effective_window == 1 && t.autocompact == 0 && t.warning == 0 && t.blocking == 0);
    CHECK(state_of(budget, 0) == FL_CONTEXT_BLOCKING);
    fl_context_budget_free(budget);

    /* The percentage override: only ever lowers the auto-compact threshold. */
    options = fl_context_budget_options_default();
    options.autocompact_percent = 50;
    budget = budget_new(200000, 32000, &options);
    CHECK(thresholds_of(budget).autocompact == 90000);
    CHECK(state_of(budget, 89999) == FL_CONTEXT_WARNING);
    CHECK(state_of(budget, 90000) == FL_CONTEXT_AUTO_COMPACT);
    check_boundaries(budget);
    fl_context_budget_free(budget);
    budget = budget_new(200000, 8000, &options); /* python: autocompact_percent=50 → 96,000 */
    CHECK(thresholds_of(budget).autocompact == 96000);
    fl_context_budget_free(budget);
    options.autocompact_percent = 99;
    budget = budget_new(200000, 32000, &options);
    CHECK(thresholds_of(budget).autocompact == 167000);
    fl_context_budget_free(budget);
    options.autocompact_percent = 100;
    budget = budget_new(200000, 32000, &options);
    CHECK(thresholds_of(budget).autocompact == 167000);
    fl_context_budget_free(budget);
    options.autocompact_percent = 0.5;
    budget = budget_new(200000, 32000, &options);
    CHECK(thresholds_of(budget).autocompact == 900);
    fl_context_budget_free(budget);
    options.autocompact_percent = -0.0; /* a zero: no percentage */
    budget = budget_new(200000, 32000, &options);
    CHECK(thresholds_of(budget).autocompact == 167000);
    fl_context_budget_free(budget);

    /* Out of (0, 100]: refused, with a message, *out untouched. */
    double bad[] = {-5, 100.5, 250, NAN, INFINITY, -INFINITY, 1e-320 * -1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        options.autocompact_percent = bad[i];
        fl_context_budget *untouched = (fl_context_budget *)&options;
        budget = untouched;
        CHECK_STATUS(fl_context_budget_new(200000, 32000, &options, &budget),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "autocompact_percent") != NULL);
        CHECK(budget == untouched);
        CHECK_STATUS(fl_context_budget_new_for_model("gpt-4o", 6, &options, &budget),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(budget == untouched);
    }
}

static void check_budget_models(void) {
    struct {
        const char *model;
        uint64_t window, max_output;
    } models[] = {
        {"claude-sonnet-4-20250514", 200000, 64000},
        {"claude-sonnet-4-5[1m]", 1000000, 64000},
        {"claude-opus-4-1", 200000, 32000},
        {"gpt-4o-mini", 128000, 16384},
        {"gpt-4-0613", 8192, 8192},
        {"gpt-4-1106-preview", 128000, 4096},
        {"GPT-4-0613", 8192, 8192},
        {"openai/gpt-4.1-mini", 1047576, 32768},
        {"anthropic/claude-3.5-haiku", 200000, 8192},
        {"us.anthropic.claude-3-5-haiku-20241022-v1:0", 200000, 8192},
        {"something-else", 200000, 32000},
        {"", 200000, 32000},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        fl_context_budget *budget = NULL;
        CHECK_OK(fl_context_budget_new_for_model(models[i].model, strlen(models[i].model), NULL,
                                                 &budget));
        fl_context_thresholds t = thresholds_of(budget);
        CHECK(t.window == models[i].window && t.max_output_tokens == models[i].max_output);
        if (t.window != models[i].window || t.max_output_tokens != models[i].max_output) {
            fprintf(stderr, "    %s: %llu / %llu\n", models[i].model, (unsigned long long)t.window,
                    (unsigned long long)t.max_output_tokens);
        }
        /* The same thresholds as a budget made from the limits. */
        fl_context_budget *by_limits = budget_new(t.window, t.max_output_tokens, NULL);
        fl_context_thresholds u = thresholds_of(by_limits);
        CHECK(memcmp(&t, &u, sizeof t) == 0);
        check_boundaries(budget);
        fl_context_budget_free(by_limits);
        fl_context_budget_free(budget);
    }
    /* gpt-4o: 128,000 − 16,384 − 13,000. */
    fl_context_budget *budget = NULL;
    CHECK_OK(fl_context_budget_new_for_model("gpt-4o", 6, NULL, &budget));
    CHECK(thresholds_of(budget).autocompact == 128000 - 16384 - 13000);
    fl_context_budget_free(budget);
    /* NULL with length 0 is the empty name: the defaults. Options apply to models too. */
    fl_context_budget_options options = fl_context_budget_options_default();
    options.autocompact_percent = 50;
    CHECK_OK(fl_context_budget_new_for_model(NULL, 0, &options, &budget));
    CHECK(thresholds_of(budget).autocompact == 90000);
    fl_context_budget_free(budget);
}

static void check_budget_arguments(void) {
    fl_context_budget *budget = NULL;
    fl_context_state state = FL_CONTEXT_OK;
    fl_context_thresholds t;
    double percent = 0;
    CHECK_STATUS(fl_context_budget_new(200000, 32000, NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`out`") != NULL);
    CHECK_STATUS(fl_context_budget_new_for_model(NULL, 3, NULL, &budget), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_budget_new_for_model("gpt\xff", 4, NULL, &budget), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_context_budget_new_for_model("gpt-4o", SIZE_MAX, NULL, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_context_budget_new_for_model("gpt-4o", 6, NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(budget == NULL);
    CHECK_STATUS(fl_context_budget_state(NULL, 0, &state), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`budget`") != NULL);
    CHECK_STATUS(fl_context_budget_thresholds(NULL, &t), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_budget_percent_left(NULL, 0, &percent), FL_STATUS_NULL_ARGUMENT);
    budget = budget_new(200000, 32000, NULL);
    CHECK_STATUS(fl_context_budget_state(budget, 0, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`state`") != NULL);
    CHECK_STATUS(fl_context_budget_thresholds(budget, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_budget_percent_left(budget, 0, NULL), FL_STATUS_NULL_ARGUMENT);
    fl_context_budget_free(budget);
    fl_context_budget_free(NULL);
}

/* An auto-compact buffer smaller than the blocking buffer puts the auto-compact point above the
 * blocking point: the state went from WARNING straight to BLOCKING. It was accepted; it is
 * FL_STATUS_INVALID_ARGUMENT naming both fields, as Python's ValueError and Node's
 * InvalidArgumentError. */
static void check_budget_refuses_blocking_before_compacting(void) {
    fl_context_budget *budget = NULL;
    fl_context_budget_options options = fl_context_budget_options_default();
    options.autocompact_buffer = 1000;
    options.blocking_buffer = 3000;
    CHECK_STATUS(fl_context_budget_new(200000, 32000, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "autocompact_buffer (1000)") != NULL);
    CHECK(strstr(last_error(), "blocking_buffer (3000)") != NULL);
    CHECK(budget == NULL);
    /* Against the default blocking buffer (3,000 for this window). */
    options = fl_context_budget_options_default();
    options.autocompact_buffer = 0;
    CHECK_STATUS(fl_context_budget_new(200000, 32000, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    /* A percentage only lowers the auto-compact point: it does not excuse the buffers. */
    options.autocompact_percent = 50;
    CHECK_STATUS(fl_context_budget_new(200000, 32000, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    options = fl_context_budget_options_default();
    options.blocking_buffer = 20000;
    CHECK_STATUS(fl_context_budget_new_for_model("claude-sonnet-4-20250514", 24, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(budget == NULL);
    /* Equal buffers are one point, where the more urgent state wins. */
    options = fl_context_budget_options_default();
    options.autocompact_buffer = 3000;
    options.blocking_buffer = 3000;
    budget = budget_new(200000, 32000, &options);
    fl_context_thresholds t = thresholds_of(budget);
    CHECK(t.autocompact == 177000 && t.blocking == 177000);
    fl_context_budget_free(budget);
    /* A window smaller than the buffers is accepted: every threshold is 0, every count blocks. */
    options.autocompact_buffer = 5000;
    options.blocking_buffer = 4000;
    budget = budget_new(1000, 100, &options);
    t = thresholds_of(budget);
    CHECK(t.autocompact == 0 && t.blocking == 0);
    CHECK(state_of(budget, 0) == FL_CONTEXT_BLOCKING);
    fl_context_budget_free(budget);
}

/* Settings given apply as given and only the defaults scale, as Python's and Node's constructors
 * do (the core's with_overrides): the default blocking buffer passed explicitly on gpt-4's
 * window was refused against an auto-compact default scaled to 1,293, and an auto-compact
 * buffer leaving nothing of the window was accepted (a context compacted before every
 * request). */
static void check_budget_settings_apply_as_given(void) {
    fl_context_budget *budget = NULL;
    fl_context_budget_options options = fl_context_budget_options_default();
    options.blocking_buffer = 3000;
    budget = budget_new(8192, 8192, &options);
    fl_context_thresholds t = thresholds_of(budget);
    CHECK(t.warning < t.autocompact && t.autocompact <= t.blocking);
    CHECK(state_of(budget, 0) == FL_CONTEXT_OK);
    fl_context_budget_free(budget);
    options = fl_context_budget_options_default();
    options.autocompact_buffer = 13000;
    budget = NULL;
    CHECK_STATUS(fl_context_budget_new(8192, 8192, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "auto-compact threshold is 0") != NULL);
    CHECK(budget == NULL);
    CHECK_STATUS(fl_context_budget_new_for_model("gpt-4", 5, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(budget == NULL);
    options = fl_context_budget_options_default();
    options.autocompact_percent = 0.0001;
    CHECK_STATUS(fl_context_budget_new(200000, 32000, &options, &budget),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "autocompact_percent (0.0001)") != NULL);
    CHECK(budget == NULL);
}

static fl_token_count count_of(const fl_context_tracker *tracker) {
    fl_token_count count = {UINT64_MAX, (fl_count_method)99};
    CHECK_OK(fl_context_tracker_tokens(tracker, &count));
    return count;
}

#define JSON(tracker, fn, text) fn(tracker, text, strlen(text))

static void check_tracker_anchoring(void) {
    /* python/tests/test_tokens.py test_context_tracker_anchors_on_usage. */
    CHECK(FL_COUNT_EXACT == 0 && FL_COUNT_USAGE_ESTIMATE == 1 && FL_COUNT_ESTIMATE == 2);
    fl_context_tracker *tracker = NULL;
    CHECK_OK(fl_context_tracker_new("claude", 6, &tracker));
    fl_token_count count = count_of(tracker);
    CHECK(count.method == FL_COUNT_ESTIMATE);
    CHECK_OK(JSON(tracker, fl_context_tracker_set_system, "\"You are terse.\""));
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message,
                  "{\"role\":\"user\",\"content\":\"Summarise the file. Summarise the file. "
                  "Summarise the file. Summarise the file.\"}"));
    fl_token_count first = count_of(tracker);
    CHECK(first.method == FL_COUNT_ESTIMATE && first.tokens > count.tokens);
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage,
                  "{\"input_tokens\":1000,\"output_tokens\":20,\"cache_read_input_tokens\":0}"));
    count = count_of(tracker);
    CHECK(count.tokens == 1020 && count.method == FL_COUNT_EXACT);
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message,
                  "{\"role\":\"user\",\"content\":\"and more and more and more\"}"));
    count = count_of(tracker);
    CHECK(count.method == FL_COUNT_USAGE_ESTIMATE && count.tokens > 1020);
    size_t len = 0;
    CHECK_OK(fl_context_tracker_len(tracker, &len));
    CHECK(len == 2);
    /* Truncating back to the covered prefix keeps the anchor: exact again. */
    CHECK_OK(fl_context_tracker_truncate(tracker, 1));
    CHECK_OK(fl_context_tracker_len(tracker, &len));
    CHECK(len == 1);
    count = count_of(tracker);
    CHECK(count.tokens == 1020 && count.method == FL_COUNT_EXACT);
    CHECK_OK(fl_context_tracker_truncate(tracker, SIZE_MAX));
    CHECK_OK(fl_context_tracker_len(tracker, &len));
    CHECK(len == 1);
    /* Truncating into it drops the anchor. */
    CHECK_OK(fl_context_tracker_truncate(tracker, 0));
    CHECK(count_of(tracker).method == FL_COUNT_ESTIMATE);

    /* node/test/tokens.test.js: cache reads count; OpenAI's shape; partial coverage. */
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message,
                  "{\"role\":\"user\",\"content\":\"What is in the repo?\"}"));
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage,
                  "{\"input_tokens\":1200,\"cache_creation_input_tokens\":0,"
                  "\"cache_read_input_tokens\":300,\"output_tokens\":0}"));
    count = count_of(tracker);
    CHECK(count.tokens == 1500 && count.method == FL_COUNT_EXACT);
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message,
                  "{\"role\":\"assistant\",\"content\":\"A Rust workspace.\"}"));
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage,
                  "{\"prompt_tokens\":1600,\"completion_tokens\":12}"));
    count = count_of(tracker);
    CHECK(count.tokens == 1612 && count.method == FL_COUNT_EXACT);
    CHECK_OK(fl_context_tracker_record_usage_at(tracker, "{\"input_tokens\":700}", 20, 1));
    count = count_of(tracker);
    CHECK(count.tokens > 700 && count.method == FL_COUNT_USAGE_ESTIMATE);
    /* Covering more than there is covers everything. */
    CHECK_OK(fl_context_tracker_record_usage_at(tracker, "{\"input_tokens\":900}", 20, SIZE_MAX));
    count = count_of(tracker);
    CHECK(count.tokens == 900 && count.method == FL_COUNT_EXACT);
    /* Usage with no prompt tokens is missing, not measured: ignored. */
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage, "{\"output_tokens\":5}"));
    count = count_of(tracker);
    CHECK(count.tokens == 900 && count.method == FL_COUNT_EXACT);
    /* A count that is not a non-negative integer is refused, naming the field, and the tracker
       is unchanged (read as absent, a negative input made the usage "output only": ignored). */
    CHECK_STATUS(JSON(tracker, fl_context_tracker_record_usage,
                      "{\"input_tokens\":-5,\"output_tokens\":3}"),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "input_tokens") != NULL);
    CHECK_STATUS(JSON(tracker, fl_context_tracker_record_usage,
                      "{\"input_tokens\":700,\"cache_read_input_tokens\":12.5}"),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_record_usage_at(tracker, "{\"input_tokens\":\"700\"}", 22, 1),
                 FL_STATUS_INVALID_ARGUMENT);
    count = count_of(tracker);
    CHECK(count.tokens == 900 && count.method == FL_COUNT_EXACT);
    /* null is absent, as the SDKs send it. */
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage,
                  "{\"input_tokens\":950,\"cache_creation_input_tokens\":null}"));
    CHECK(count_of(tracker).tokens == 950);
    /* Absurd usage saturates. */
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage,
                  "{\"input_tokens\":18446744073709551615,\"output_tokens\":18446744073709551615}"));
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message, "{\"role\":\"user\",\"content\":\"x\"}"));
    count = count_of(tracker);
    CHECK(count.tokens == UINT64_MAX && count.method == FL_COUNT_USAGE_ESTIMATE);
    /* Setting the same system prompt keeps the anchor; a new one drops it. */
    CHECK_OK(JSON(tracker, fl_context_tracker_set_system, "\"You are terse.\""));
    CHECK(count_of(tracker).method == FL_COUNT_USAGE_ESTIMATE);
    CHECK_OK(JSON(tracker, fl_context_tracker_set_system,
                  "[{\"type\":\"text\",\"text\":\"You are verbose.\"}]"));
    CHECK(count_of(tracker).method == FL_COUNT_ESTIMATE);
    CHECK_OK(JSON(tracker, fl_context_tracker_set_tools,
                  "[{\"name\":\"read\",\"description\":\"Read a file\","
                  "\"input_schema\":{\"type\":\"object\"}}]"));
    CHECK_OK(JSON(tracker, fl_context_tracker_set_tools, "null"));
    CHECK_OK(JSON(tracker, fl_context_tracker_set_system, "null"));
    fl_context_tracker_free(tracker);
}

/* Without usage, the tracker's estimate is the request estimate of the same parts. */
static void check_tracker_matches_the_request_estimate(void) {
    const char *system = "\"You are terse.\"";
    const char *tools = "[{\"name\":\"ls\",\"description\":\"list\",\"input_schema\":{\"type\":\"object\"}}]";
    const char *messages =
        "[{\"role\":\"user\",\"content\":\"Summarise README.md\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"ls\","
        "\"input\":{\"path\":\".\"}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
        "\"content\":\"README.md Cargo.toml core cli\"}]}]";
    buffer body = {0};
    buffer_append_str(&body, "{\"system\":");
    buffer_append_str(&body, system);
    buffer_append_str(&body, ",\"tools\":");
    buffer_append_str(&body, tools);
    buffer_append_str(&body, ",\"messages\":");
    buffer_append_str(&body, messages);
    buffer_append_str(&body, "}");
    const char *families[] = {"claude", "claude-legacy", "o200k", "cl100k"};
    for (size_t f = 0; f < 4; f++) {
        fl_request_estimate parts;
        CHECK_OK(fl_tokens_estimate_request(body.data, body.len, families[f], strlen(families[f]),
                                            &parts));
        fl_context_tracker *tracker = NULL;
        CHECK_OK(fl_context_tracker_new(families[f], strlen(families[f]), &tracker));
        CHECK_OK(JSON(tracker, fl_context_tracker_set_system, system));
        CHECK_OK(JSON(tracker, fl_context_tracker_set_tools, tools));
        CHECK_OK(JSON(tracker, fl_context_tracker_replace_messages, messages));
        size_t len = 0;
        CHECK_OK(fl_context_tracker_len(tracker, &len));
        CHECK(len == 3);
        fl_token_count count = count_of(tracker);
        CHECK(count.method == FL_COUNT_ESTIMATE && count.tokens == parts.total);
        /* Replacing with the same messages estimates nothing again. */
        uint64_t bytes = 0, again = 1;
        CHECK_OK(fl_context_tracker_bytes_estimated(tracker, &bytes));
        CHECK(bytes > 0);
        CHECK_OK(JSON(tracker, fl_context_tracker_replace_messages, messages));
        CHECK_OK(fl_context_tracker_bytes_estimated(tracker, &again));
        CHECK(again == bytes);
        CHECK(count_of(tracker).tokens == parts.total);
        CHECK_OK(JSON(tracker, fl_context_tracker_replace_messages, "[]"));
        CHECK_OK(fl_context_tracker_len(tracker, &len));
        CHECK(len == 0);
        fl_context_tracker_free(tracker);
    }
    buffer_free(&body);
}

static void check_tracker_correction(void) {
    fl_context_tracker *tracker = NULL;
    CHECK_OK(fl_context_tracker_new(NULL, 0, &tracker));
    double correction = 0;
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == 1.0);
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message,
                  "{\"role\":\"user\",\"content\":\"What is in the repo? What is in the repo? "
                  "What is in the repo? What is in the repo? What is in the repo?\"}"));
    uint64_t raw = count_of(tracker).tokens;
    CHECK_OK(fl_context_tracker_set_correction(tracker, 1.5));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == 1.5);
    CHECK(count_of(tracker).tokens > raw);
    /* Clamped to [0.8, 1.6]. */
    CHECK_OK(fl_context_tracker_set_correction(tracker, 1e300));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == 1.6);
    CHECK_OK(fl_context_tracker_set_correction(tracker, 1e-300));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == 0.8);
    double bad[] = {-1.0, 0.0, -0.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(fl_context_tracker_set_correction(tracker, bad[i]), FL_STATUS_INVALID_ARGUMENT);
        CHECK(strstr(last_error(), "correction") != NULL);
    }
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == 0.8);
    fl_context_tracker_free(tracker);
}

/* Each model learns its own correction (as in Python and Node): one factor per tracker mixed the
 * usage of every model a conversation went to (a fallback after an overload). */
static void check_tracker_correction_per_model(void) {
    fl_context_tracker *tracker = NULL;
    CHECK_OK(fl_context_tracker_new(NULL, 0, &tracker));
    CHECK_OK(fl_context_tracker_set_model(tracker, "model-a", 7));
    buffer message = {0};
    buffer_append_str(&message, "{\"role\":\"user\",\"content\":\"");
    for (int i = 0; i < 100; i++) buffer_append_str(&message, "What is in the repo? ");
    buffer_append_str(&message, "\"}");
    CHECK_OK(fl_context_tracker_push_message(tracker, message.data, message.len));
    buffer_free(&message);
    uint64_t raw = count_of(tracker).tokens;
    uint64_t high = raw * 14 / 10;
    char usage[64];
    snprintf(usage, sizeof usage, "{\"input_tokens\":%llu}", (unsigned long long)high);
    for (int i = 0; i < 20; i++) CHECK_OK(JSON(tracker, fl_context_tracker_record_usage, usage));
    double a = 0, correction = 0;
    CHECK_OK(fl_context_tracker_correction(tracker, &a));
    CHECK(a > 1.35 && a <= 1.4);
    fl_token_count count = count_of(tracker);
    CHECK(count.tokens == high && count.method == FL_COUNT_EXACT);
    /* A new model starts from the current factor; the first model's count is kept, not exact. */
    CHECK_OK(fl_context_tracker_set_model(tracker, "model-b", 7));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == a);
    count = count_of(tracker);
    CHECK(count.tokens == high && count.method == FL_COUNT_USAGE_ESTIMATE);
    snprintf(usage, sizeof usage, "{\"input_tokens\":%llu}", (unsigned long long)(raw * 9 / 10));
    for (int i = 0; i < 20; i++) CHECK_OK(JSON(tracker, fl_context_tracker_record_usage, usage));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction > 0.85 && correction < 0.95);
    CHECK_OK(fl_context_tracker_correction_for(tracker, "model-a", 7, &correction));
    CHECK(correction == a);
    CHECK_OK(fl_context_tracker_correction_for(tracker, "model-c", 7, &correction));
    CHECK(correction == 0.0);
    CHECK_OK(fl_context_tracker_set_model(tracker, "model-a", 7));
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == a);
    /* Refused arguments leave the tracker as it was. */
    CHECK_STATUS(fl_context_tracker_set_model(tracker, "\xff", 1), FL_STATUS_INVALID_UTF8);
    CHECK_STATUS(fl_context_tracker_set_model(tracker, NULL, 3), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_set_model(NULL, "m", 1), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_correction_for(NULL, "m", 1, &correction), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_correction_for(tracker, "m", 1, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_correction_for(tracker, "\xff", 1, &correction),
                 FL_STATUS_INVALID_UTF8);
    CHECK_OK(fl_context_tracker_correction(tracker, &correction));
    CHECK(correction == a);
    fl_context_tracker_free(tracker);
}

static void check_tracker_arguments(void) {
    fl_context_tracker *tracker = NULL;
    CHECK_STATUS(fl_context_tracker_new("gpt2", 4, &tracker), FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "gpt2") != NULL);
    CHECK_STATUS(fl_context_tracker_new("claude", 6, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(tracker == NULL);
    CHECK_OK(fl_context_tracker_new("o200k", 5, &tracker));
    /* Every refused argument leaves the tracker as it was. */
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message, "{\"role\":\"user\",\"content\":\"hi\"}"));
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage, "{\"input_tokens\":50}"));
    fl_token_count before = count_of(tracker);
    CHECK(before.tokens == 50 && before.method == FL_COUNT_EXACT);
    struct {
        fl_status (*fn)(fl_context_tracker *, const char *, size_t);
        const char *json;
        fl_status expected;
        const char *mentions;
    } cases[] = {
        {fl_context_tracker_set_system, "You are terse.", FL_STATUS_INVALID_ARGUMENT, "system_json"},
        {fl_context_tracker_set_system, "{\"text\":\"x\"}", FL_STATUS_INVALID_ARGUMENT, "system_json"},
        {fl_context_tracker_set_system, "\"\xff\"", FL_STATUS_INVALID_UTF8, "system_json"},
        {fl_context_tracker_set_tools, "{}", FL_STATUS_INVALID_ARGUMENT, "tools_json"},
        {fl_context_tracker_set_tools, "[", FL_STATUS_INVALID_ARGUMENT, "tools_json"},
        {fl_context_tracker_push_message, "\"hello\"", FL_STATUS_INVALID_ARGUMENT, "message_json"},
        {fl_context_tracker_push_message, "", FL_STATUS_INVALID_ARGUMENT, "message_json"},
        {fl_context_tracker_push_message, "{\"role\":\"user\"} x", FL_STATUS_INVALID_ARGUMENT,
         "message_json"},
        {fl_context_tracker_replace_messages, "{}", FL_STATUS_INVALID_ARGUMENT, "messages_json"},
        {fl_context_tracker_replace_messages, "[{\"role\":\"user\"},3]", FL_STATUS_INVALID_ARGUMENT,
         "message 1"},
        {fl_context_tracker_record_usage, "{\"nothing\":1}", FL_STATUS_INVALID_ARGUMENT, "usage"},
        {fl_context_tracker_record_usage, "[]", FL_STATUS_INVALID_ARGUMENT, "usage"},
        {fl_context_tracker_record_usage, "{\"input_tokens\":-1}", FL_STATUS_INVALID_ARGUMENT, "usage"},
        {fl_context_tracker_record_usage, "{\"input_tokens\":1.5}", FL_STATUS_INVALID_ARGUMENT, "usage"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_STATUS(cases[i].fn(tracker, cases[i].json, strlen(cases[i].json)), cases[i].expected);
        if (strstr(last_error(), cases[i].mentions) == NULL) {
            CHECK(!"the message names the argument");
            fprintf(stderr, "    case %zu: %s\n", i, last_error());
        }
        fl_token_count after = count_of(tracker);
        CHECK(after.tokens == before.tokens && after.method == before.method);
        /* The same JSON through a NULL tracker: the tracker is named first. */
        CHECK_STATUS(cases[i].fn(NULL, cases[i].json, strlen(cases[i].json)), FL_STATUS_NULL_ARGUMENT);
        CHECK(strstr(last_error(), "`tracker`") != NULL);
        /* NULL JSON with a length; NULL with length 0 is empty text, not valid JSON. */
        CHECK_STATUS(cases[i].fn(tracker, NULL, 2), FL_STATUS_NULL_ARGUMENT);
        CHECK_STATUS(cases[i].fn(tracker, NULL, 0), FL_STATUS_INVALID_ARGUMENT);
        CHECK_STATUS(cases[i].fn(tracker, "{}", SIZE_MAX), FL_STATUS_INVALID_ARGUMENT);
    }
    /* Deep nesting is refused by the parser's depth limit, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(depth);
    memset(deep, '[', depth);
    CHECK_STATUS(fl_context_tracker_replace_messages(tracker, deep, depth), FL_STATUS_INVALID_ARGUMENT);
    free(deep);
    CHECK_STATUS(fl_context_tracker_record_usage_at(tracker, "{}", 2, 0), FL_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_record_usage_at(NULL, "{\"input_tokens\":1}", 18, 0),
                 FL_STATUS_NULL_ARGUMENT);
    fl_token_count after = count_of(tracker);
    CHECK(after.tokens == before.tokens && after.method == before.method);

    size_t len = 0;
    uint64_t bytes = 0;
    double correction = 0;
    fl_token_count count;
    CHECK_STATUS(fl_context_tracker_truncate(NULL, 0), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_len(NULL, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_len(tracker, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_tokens(NULL, &count), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_tokens(tracker, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_correction(NULL, &correction), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_correction(tracker, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_set_correction(NULL, 1.0), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_bytes_estimated(NULL, &bytes), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_context_tracker_bytes_estimated(tracker, NULL), FL_STATUS_NULL_ARGUMENT);
    fl_context_tracker_free(tracker);
    fl_context_tracker_free(NULL);
}

/* The intended use: a host compares the tracker's count with the budget before each request. */
static void check_tracker_with_budget(void) {
    fl_context_budget *budget = NULL;
    CHECK_OK(fl_context_budget_new_for_model("claude-sonnet-4-5", 17, NULL, &budget));
    fl_context_tracker *tracker = NULL;
    CHECK_OK(fl_context_tracker_new(NULL, 0, &tracker));
    CHECK_OK(JSON(tracker, fl_context_tracker_push_message, "{\"role\":\"user\",\"content\":\"hi\"}"));
    CHECK(state_of(budget, count_of(tracker).tokens) == FL_CONTEXT_OK);
    fl_context_thresholds t = thresholds_of(budget);
    char usage[128];
    snprintf(usage, sizeof usage, "{\"input_tokens\":%llu}", (unsigned long long)t.autocompact);
    CHECK_OK(JSON(tracker, fl_context_tracker_record_usage, usage));
    CHECK(state_of(budget, count_of(tracker).tokens) == FL_CONTEXT_AUTO_COMPACT);
    fl_context_tracker_free(tracker);
    fl_context_budget_free(budget);
}

/* A budget is immutable: several threads read one at once. */
static void *read_budget(void *arg) {
    const fl_context_budget *budget = arg;
    for (uint64_t tokens = 0; tokens < 200000; tokens += 997) {
        fl_context_thresholds t = thresholds_of(budget);
        CHECK(state_of(budget, tokens) == expected_state(t, tokens));
        double percent = -1;
        CHECK_OK(fl_context_budget_percent_left(budget, tokens, &percent));
        CHECK(percent >= 0 && percent <= 100);
    }
    return NULL;
}

static void check_budget_shared_between_threads(void) {
    fl_context_budget *budget = budget_new(200000, 32000, NULL);
    pthread_t threads[4];
    for (size_t i = 0; i < 4; i++) {
        CHECK(pthread_create(&threads[i], NULL, read_budget, budget) == 0);
    }
    for (size_t i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
    }
    fl_context_budget_free(budget);
}

int main(void) {
    check_budget_defaults();
    check_budget_overrides();
    check_budget_models();
    check_budget_arguments();
    check_budget_refuses_blocking_before_compacting();
    check_budget_settings_apply_as_given();
    check_budget_shared_between_threads();
    check_tracker_anchoring();
    check_tracker_matches_the_request_estimate();
    check_tracker_correction();
    check_tracker_correction_per_model();
    check_tracker_arguments();
    check_tracker_with_budget();
    return check_summary("test_context");
}
