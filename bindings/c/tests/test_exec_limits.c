/*
 * Result size limits of an executor made with fl_executor_new_json and tools added with
 * fl_executor_add_tool_json: a result over the executor's limit becomes the preview plus a spill
 * file under the given spill_dir, a tool's own limit (or "unlimited") replaces the executor's, the
 * turn budget spills the largest result of a batch, an input_schema is enforced (`$ref` and
 * `anyOf` too), and bad options are refused naming the key.
 *
 * The expected replacement is the core's wrapper (core/src/exec/budget.rs), which Python's and
 * Node's executors share: the exact text is checked, not a fragment.
 *
 * Usage: test_exec_limits
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"

/* How many times the "lines" tools were called. */
static int calls = 0;

/* The text a "lines" tool answers for `count` lines: "line 0000\n", "line 0001\n", ... */
static char *lines_text(int count) {
    char *text = malloc((size_t)count * 10 + 1);
    if (text == NULL) {
        exit(2);
    }
    for (int i = 0; i < count; i++) {
        snprintf(text + (size_t)i * 10, 11, "line %04d\n", i % 10000);
    }
    text[(size_t)count * 10] = '\0';
    return text;
}

/* The "lines" tools: input {"lines": N}; the reply is lines_text(N). */
static void lines_tool(void *userdata, const fl_tool_invocation *invocation, fl_tool_call *call) {
    (void)userdata;
    calls++;
    /* The input is a view, not NUL-terminated: copy it before reading it as a string. */
    char input[64] = {0};
    size_t len = invocation->input_json_len;
    memcpy(input, invocation->input_json, len < sizeof input - 1 ? len : sizeof input - 1);
    int count = 0;
    const char *key = strstr(input, "\"lines\":");
    CHECK(key != NULL && sscanf(key + 8, "%d", &count) == 1);
    char *text = lines_text(count);
    CHECK_OK(fl_tool_complete(call, text, strlen(text), false));
    free(text);
}

/* `text` as the body of a JSON string (only newlines need escaping in these ASCII texts). */
static void append_escaped(buffer *out, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            buffer_append_str(out, "\\n");
        } else {
            buffer_append(out, &text[i], 1);
        }
    }
}

/* The tool_result the model is given for `content` (`len` bytes) of call `id`. */
static char *result_json(const char *id, const char *content, size_t len) {
    buffer out = {0};
    buffer_append_str(&out, "{\"type\":\"tool_result\",\"tool_use_id\":\"");
    buffer_append_str(&out, id);
    buffer_append_str(&out, "\",\"content\":\"");
    append_escaped(&out, content, len);
    buffer_append_str(&out, "\",\"is_error\":false}");
    return out.data;
}

/* The tool_result of call `id` holding the whole text of `lines` lines (nothing spilled). */
static char *whole_json(const char *id, int lines) {
    char *text = lines_text(lines);
    char *json = result_json(id, text, strlen(text));
    free(text);
    return json;
}

/* The fingerprint in a spill file's name (the core's `text_fingerprint`): FNV-1a 64. */
static uint64_t fnv1a_64(const char *text, size_t len) {
    uint64_t value = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        value = (value ^ (unsigned char)text[i]) * 0x100000001b3ULL;
    }
    return value;
}

/* The tool_result of call `id`, whose full text (`lines` lines) was spilled to
 * `<spill_dir>/<id>-<fingerprint of the text>.txt`, with a preview of `preview_bytes` at
 * most. */
static char *spilled_json(const char *id, int lines, const char *spill_dir, size_t preview_bytes) {
    char *text = lines_text(lines);
    size_t len = strlen(text);
    /* The preview: the first bytes, cut back to the last newline (which keeps over half). */
    size_t preview = len <= preview_bytes ? len : preview_bytes;
    if (preview < len) {
        size_t newline = preview;
        while (newline > 0 && text[newline - 1] != '\n') {
            newline--;
        }
        if (newline > 0 && newline - 1 >= preview / 2) {
            preview = newline - 1;
        }
    }
    char header[1024];
    snprintf(header, sizeof header,
             "<tool-output-truncated>\nOutput too large (%zu characters). Full output saved to: "
             "%s/%s-%016" PRIx64 ".txt\nRead that file to see the rest.\n\nPreview (first %zu "
             "characters):\n",
             len, spill_dir, id, fnv1a_64(text, len), preview);
    buffer content = {0};
    buffer_append_str(&content, header);
    buffer_append(&content, text, preview);
    buffer_append_str(&content, "\n...\n</tool-output-truncated>");
    char *json = result_json(id, content.data, content.len);
    buffer_free(&content);
    free(text);
    return json;
}

/* Whether `results` holds exactly `expected` (a whole tool_result object). */
static bool has_result(const char *results, char *expected) {
    bool found = results != NULL && strstr(results, expected) != NULL;
    if (!found) {
        fprintf(stderr, "expected result not found: %s\n", expected);
    }
    free(expected);
    return found;
}

/* Whether the spill file of `id` under `dir` holds the full text of `lines` lines; removes it. */
static bool spilled_whole(const char *dir, const char *id, int lines) {
    char *text = lines_text(lines);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-%016" PRIx64 ".txt", dir, id, fnv1a_64(text, strlen(text)));
    size_t len = 0;
    char *data = read_file(path, &len);
    bool same = data != NULL && len == strlen(text) && memcmp(data, text, len) == 0;
    free(data);
    free(text);
    unlink(path);
    return same;
}

/* Whether `dir` holds a spill file of `id` (`<id>-<fingerprint>.txt`), whatever its text. */
static bool exists(const char *dir, const char *id) {
    DIR *listing = opendir(dir);
    if (listing == NULL) {
        return false;
    }
    size_t id_len = strlen(id);
    bool found = false;
    for (struct dirent *entry = readdir(listing); entry != NULL && !found; entry = readdir(listing)) {
        const char *name = entry->d_name;
        size_t name_len = strlen(name);
        found = name_len == id_len + 1 + 16 + 4 && strncmp(name, id, id_len) == 0 &&
                name[id_len] == '-' && strcmp(name + name_len - 4, ".txt") == 0;
    }
    closedir(listing);
    return found;
}

static fl_executor *new_executor(const char *json) {
    fl_executor *executor = NULL;
    CHECK_OK(fl_executor_new_json(json, strlen(json), &executor));
    return executor;
}

static void add_tool(fl_executor *executor, const char *json) {
    CHECK_OK(fl_executor_add_tool_json(executor, json, strlen(json), lines_tool, NULL));
}

static const char *run(fl_executor *executor, const char *calls_json) {
    const char *results = NULL;
    size_t len = 0;
    CHECK_OK(fl_executor_run(executor, calls_json, strlen(calls_json), NULL, &results, &len));
    return results;
}

/* The executor's limit (100 characters here) spills a tool that sets none (registered with
 * fl_tool_options, or with JSON and no limit); a tool's own limit replaces it, larger or
 * "unlimited"; the turn budget is off. */
static void check_result_limits(const char *root) {
    char spill_dir[512];
    snprintf(spill_dir, sizeof spill_dir, "%s/spills", root);
    char options[1024];
    snprintf(options, sizeof options,
             "{\"spill_dir\": \"%s\", \"max_result_chars\": 100, \"turn_budget_chars\": \"unlimited\","
             " \"max_concurrency\": 2, \"cleanup_grace_ms\": 100, \"default_timeout_ms\": 10000}",
             spill_dir);
    fl_executor *executor = new_executor(options);
    CHECK_OK(fl_executor_add_tool(executor, "plain", 5, NULL, lines_tool, NULL));
    add_tool(executor, "{\"name\": \"roomy\", \"max_result_chars\": 1000, \"concurrency_safe\": true}");
    add_tool(executor, "{\"name\": \"free\", \"max_result_chars\": \"unlimited\", \"timeout_ms\": 10000}");
    const char *results = run(executor,
                              "[{\"id\":\"p_small\",\"name\":\"plain\",\"input\":{\"lines\":10}},"
                              "{\"id\":\"p_big\",\"name\":\"plain\",\"input\":{\"lines\":30}},"
                              "{\"id\":\"r_small\",\"name\":\"roomy\",\"input\":{\"lines\":30}},"
                              "{\"id\":\"r_big\",\"name\":\"roomy\",\"input\":{\"lines\":120}},"
                              "{\"id\":\"f_big\",\"name\":\"free\",\"input\":{\"lines\":120}}]");
    CHECK(has_result(results, whole_json("p_small", 10)));
    /* Over the executor's 100: a preview of at most 100 bytes. */
    CHECK(has_result(results, spilled_json("p_big", 30, spill_dir, 100)));
    CHECK(spilled_whole(spill_dir, "p_big", 30));
    /* The tool's 1000 instead. */
    CHECK(has_result(results, whole_json("r_small", 30)));
    CHECK(has_result(results, spilled_json("r_big", 120, spill_dir, 1000)));
    CHECK(spilled_whole(spill_dir, "r_big", 120));
    /* No limit at all. */
    CHECK(has_result(results, whole_json("f_big", 120)));
    CHECK(!exists(spill_dir, "p_small") && !exists(spill_dir, "r_small") && !exists(spill_dir, "f_big"));
    fl_executor_free(executor);
    CHECK(rmdir(spill_dir) == 0);
}

/* The turn budget (7000 characters of 8000 here) spills the largest result of the batch, with
 * the default preview (2 KiB cut back to a newline); the others stay whole. */
static void check_turn_budget(const char *root) {
    char spill_dir[512];
    snprintf(spill_dir, sizeof spill_dir, "%s/turn", root);
    char options[1024];
    snprintf(options, sizeof options,
             "{\"spill_dir\": \"%s\", \"max_result_chars\": \"unlimited\", \"turn_budget_chars\": 7000}",
             spill_dir);
    fl_executor *executor = new_executor(options);
    add_tool(executor, "{\"name\": \"lines\", \"concurrency_safe\": true}");
    const char *results = run(executor, "[{\"id\":\"x\",\"name\":\"lines\",\"input\":{\"lines\":300}},"
                                        "{\"id\":\"y\",\"name\":\"lines\",\"input\":{\"lines\":400}},"
                                        "{\"id\":\"z\",\"name\":\"lines\",\"input\":{\"lines\":100}}]");
    CHECK(has_result(results, whole_json("x", 300)));
    CHECK(has_result(results, spilled_json("y", 400, spill_dir, 2048)));
    CHECK(spilled_whole(spill_dir, "y", 400));
    CHECK(has_result(results, whole_json("z", 100)));
    CHECK(!exists(spill_dir, "x") && !exists(spill_dir, "z"));
    fl_executor_free(executor);
    CHECK(rmdir(spill_dir) == 0);
}

/* A tool's input_schema is enforced: a call whose input does not match is an error result and
 * the callback never runs. */
static void check_input_schema(void) {
    fl_executor *executor = new_executor("");
    add_tool(executor, "{\"name\": \"lines\", \"description\": \"Numbered lines.\", \"input_schema\": "
                       "{\"type\": \"object\", \"properties\": {\"lines\": {\"type\": \"integer\"}},"
                       " \"required\": [\"lines\"]}}");
    calls = 0;
    const char *results = run(executor, "[{\"id\":\"bad\",\"name\":\"lines\",\"input\":{\"count\":2}},"
                                        "{\"id\":\"good\",\"name\":\"lines\",\"input\":{\"lines\":1}}]");
    CHECK(calls == 1);
    const char *refused = "{\"type\":\"tool_result\",\"tool_use_id\":\"bad\",\"content\":\"Invalid input "
                          "for tool 'lines': input: missing required property \\\"lines\\\"\",\"is_error\":true}";
    CHECK(results != NULL && strstr(results, refused) != NULL);
    CHECK(has_result(results, result_json("good", "line 0000\n", 10)));
    fl_executor_free(executor);
}

/* Schemas as Pydantic writes them: a `$ref` into `$defs` under `anyOf` with null is enforced
 * (it was accepted and not checked), and a `$ref` that resolves to nothing is refused when the
 * tool is added, naming it (tools are added before the first run). */
static void check_input_schema_refs(void) {
    fl_executor *executor = new_executor("");
    add_tool(executor, "{\"name\": \"lines\", \"input_schema\": {"
                       "\"$defs\": {\"Count\": {\"type\": \"integer\", \"minimum\": 1}},"
                       " \"type\": \"object\", \"required\": [\"lines\"], \"properties\": {"
                       "\"lines\": {\"$ref\": \"#/$defs/Count\"},"
                       " \"label\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"null\"}]}}}}");
    const char *broken = "{\"name\": \"broken\", \"input_schema\": {\"$ref\": \"#/$defs/Missing\"}}";
    CHECK_STATUS(fl_executor_add_tool_json(executor, broken, strlen(broken), lines_tool, NULL),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "`$ref` \"#/$defs/Missing\" does not resolve") != NULL);
    calls = 0;
    const char *results = run(executor, "[{\"id\":\"bad\",\"name\":\"lines\",\"input\":{\"lines\":0,\"label\":5}},"
                                        "{\"id\":\"good\",\"name\":\"lines\",\"input\":{\"lines\":1,\"label\":null}}]");
    CHECK(calls == 1);
    const char *refused = "{\"type\":\"tool_result\",\"tool_use_id\":\"bad\",\"content\":\"Invalid input "
                          "for tool 'lines': input.lines: must be at least 1, got 0; input.label: matches no "
                          "alternative of `anyOf`: expected null or string, got number\",\"is_error\":true}";
    CHECK(results != NULL && strstr(results, refused) != NULL);
    CHECK(has_result(results, result_json("good", "line 0000\n", 10)));
    fl_executor_free(executor);
}

/* Bad options are refused naming the key; nothing is made. */
static void check_bad_options(void) {
    const char *cases[][2] = {
        {"{\"max_result_chars\": \"inf\"}", "\"max_result_chars\""},
        {"{\"turn_budget_chars\": -5}", "\"turn_budget_chars\""},
        {"{\"default_timeout\": 5}", "unknown executor option \"default_timeout\""},
        {"{\"max_concurrency\": 0}", "\"max_concurrency\" is 0"},
        {"{\"spill_dir\": []}", "\"spill_dir\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fl_executor *executor = NULL;
        CHECK_STATUS(fl_executor_new_json(cases[i][0], strlen(cases[i][0]), &executor),
                     FL_STATUS_INVALID_ARGUMENT);
        CHECK(executor == NULL);
        CHECK(strstr(last_error(), cases[i][1]) != NULL);
    }
    fl_executor *executor = new_executor("{\"max_concurrency\": null}");
    const char *tool = "{\"name\": \"t\", \"max_result_chars\": 1.5}";
    CHECK_STATUS(fl_executor_add_tool_json(executor, tool, strlen(tool), lines_tool, NULL),
                 FL_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(last_error(), "tool option \"max_result_chars\"") != NULL);
    tool = "{\"name\": \"t\"}";
    CHECK_STATUS(fl_executor_add_tool_json(executor, tool, strlen(tool), NULL, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_add_tool_json(NULL, tool, strlen(tool), lines_tool, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_executor_new_json(tool, strlen(tool), NULL), FL_STATUS_NULL_ARGUMENT);
    fl_executor_free(executor);
}

int main(void) {
    char root[] = "/tmp/ferroloop-limits-XXXXXX";
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    check_result_limits(root);
    check_turn_budget(root);
    check_input_schema();
    check_input_schema_refs();
    check_bad_options();
    CHECK(rmdir(root) == 0);
    return check_summary("test_exec_limits");
}
