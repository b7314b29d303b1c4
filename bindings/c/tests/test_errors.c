/*
 * The boundary contract: status codes and their messages, NULL arguments, the thread-local last
 * error, caller buffers that are too small, and a deliberate panic caught as FL_STATUS_PANIC.
 *
 * Usage: test_errors
 */
#include <pthread.h>
#include <stdint.h>

#include "check.h"

static void check_status_values(void) {
    /* The numeric values are ABI: they must never change. */
    CHECK(FL_STATUS_OK == 0);
    CHECK(FL_STATUS_NULL_ARGUMENT == 1);
    CHECK(FL_STATUS_INVALID_UTF8 == 2);
    CHECK(FL_STATUS_INVALID_ARGUMENT == 3);
    CHECK(FL_STATUS_PROTOCOL_ERROR == 4);
    CHECK(FL_STATUS_TRUNCATED == 5);
    CHECK(FL_STATUS_BUFFER_TOO_SMALL == 6);
    CHECK(FL_STATUS_PANIC == 7);
    CHECK(FL_STATUS_INVALID_STATE == 8);
    CHECK(FL_STATUS_CANCELLED == 9);
    CHECK(FL_STATUS_PROVIDER_ERROR == 10);
    CHECK(FL_STATUS_CONNECTION_ERROR == 11);
    CHECK(FL_STATUS_TIMEOUT == 12);
}

static void check_status_messages(void) {
    char message[128];
    size_t written = 0;
    CHECK_OK(fl_status_message(FL_STATUS_OK, message, sizeof message, &written));
    CHECK(strcmp(message, "ok") == 0 && written == 2);
    CHECK_OK(fl_status_message(FL_STATUS_PANIC, message, sizeof message, &written));
    CHECK(strstr(message, "panic") != NULL && written == strlen(message));
    CHECK_OK(fl_status_message(-5, message, sizeof message, &written));
    CHECK(strcmp(message, "unknown status") == 0);

    /* Length query, then a buffer too small: truncated, NUL-terminated, full length reported. */
    CHECK_STATUS(fl_status_message(FL_STATUS_NULL_ARGUMENT, NULL, 0, &written),
                 FL_STATUS_BUFFER_TOO_SMALL);
    size_t full = written;
    CHECK(full > 8);
    char small[8];
    CHECK_STATUS(fl_status_message(FL_STATUS_NULL_ARGUMENT, small, sizeof small, &written),
                 FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(written == full && strlen(small) == sizeof small - 1);
    CHECK_STATUS(fl_status_message(FL_STATUS_OK, message, sizeof message, NULL),
                 FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_status_message(FL_STATUS_OK, NULL, 10, &written), FL_STATUS_NULL_ARGUMENT);
}

static void check_null_arguments(void) {
    fl_sse_parser *parser = NULL;
    fl_sse_item item;
    uint64_t number = 0;
    bool flag = false;
    const char *text = NULL;
    size_t len = 0;
    CHECK_STATUS(fl_sse_parser_new(NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`out`") != NULL);
    CHECK_STATUS(fl_sse_parser_new_with_max_event_bytes(10, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_feed(NULL, (const uint8_t *)"x", 1), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`parser`") != NULL);
    CHECK_STATUS(fl_sse_parser_next(NULL, &item), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_finish(NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_retry(NULL, &number, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_last_event_id(NULL, &text, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_dropped_events(NULL, &number), FL_STATUS_NULL_ARGUMENT);

    CHECK_OK(fl_sse_parser_new(&parser));
    CHECK_STATUS(fl_sse_parser_feed(parser, NULL, 3), FL_STATUS_NULL_ARGUMENT);
    CHECK(strstr(last_error(), "`data`") != NULL);
    CHECK_OK(fl_sse_parser_feed(parser, NULL, 0));
    CHECK_STATUS(fl_sse_parser_next(parser, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_retry(parser, NULL, &flag), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_retry(parser, &number, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_last_event_id(parser, NULL, &len), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_last_event_id(parser, &text, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(fl_sse_parser_dropped_events(parser, NULL), FL_STATUS_NULL_ARGUMENT);
    CHECK_OK(fl_sse_parser_finish(parser, NULL)); /* `discarded` is optional */
    CHECK_STATUS(fl_sse_parser_new_with_max_event_bytes(0, &parser), FL_STATUS_INVALID_ARGUMENT);
    fl_sse_parser_free(parser);
    fl_sse_parser_free(NULL);
}

static void check_last_error_buffer(void) {
    CHECK_STATUS(fl_sse_parser_new(NULL), FL_STATUS_NULL_ARGUMENT);
    size_t full = 0, written = 0;
    CHECK_STATUS(fl_last_error_message(NULL, 0, &full), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(full == strlen("argument `out` must not be NULL"));
    char small[4];
    CHECK_STATUS(fl_last_error_message(small, sizeof small, &written), FL_STATUS_BUFFER_TOO_SMALL);
    CHECK(written == full && strcmp(small, "arg") == 0);
    /* Reading it failed, yet the message is unchanged: retry with a large enough buffer. */
    char *message = malloc(full + 1);
    CHECK_OK(fl_last_error_message(message, full + 1, &written));
    CHECK(strcmp(message, "argument `out` must not be NULL") == 0);
    free(message);
    CHECK_STATUS(fl_last_error_message(small, sizeof small, NULL), FL_STATUS_NULL_ARGUMENT);
}

static void *fail_on_another_thread(void *arg) {
    (void)arg;
    fl_sse_parser_feed(NULL, NULL, 0);
    return NULL;
}

static void check_last_error_is_thread_local(void) {
    CHECK_STATUS(fl_sse_parser_new(NULL), FL_STATUS_NULL_ARGUMENT);
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, fail_on_another_thread, NULL) == 0);
    pthread_join(thread, NULL);
    CHECK(strstr(last_error(), "`out`") != NULL);
}

static void check_panic_is_caught(void) {
    CHECK_STATUS(fl_debug_panic(), FL_STATUS_PANIC);
    CHECK(strstr(last_error(), "panic") != NULL);
    CHECK(strstr(last_error(), "deliberate") != NULL);
    /* The library stays usable after a caught panic. */
    fl_sse_parser *parser = NULL;
    CHECK_OK(fl_sse_parser_new(&parser));
    CHECK_OK(fl_sse_parser_feed(parser, (const uint8_t *)"data: after\n\n", 13));
    fl_sse_item item;
    CHECK_OK(fl_sse_parser_next(parser, &item));
    CHECK(item.kind == FL_SSE_ITEM_EVENT && text_equals(item.event.data, item.event.data_len, "after"));
    fl_sse_parser_free(parser);
}

int main(void) {
    CHECK(fl_version() != NULL && strlen(fl_version()) > 0);
    {
        size_t written = 99;
        char message[16];
        /* No failure yet on this thread: the last error is empty. */
        CHECK_OK(fl_last_error_message(message, sizeof message, &written));
        CHECK(written == 0 && message[0] == '\0');
    }
    check_status_values();
    check_status_messages();
    check_null_arguments();
    check_last_error_buffer();
    check_last_error_is_thread_local();
    check_panic_is_caught();
    return check_summary("test_errors");
}
