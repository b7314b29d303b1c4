/*
 * A minimal check harness for the C tests of libferroloop: CHECK macros that count failures
 * instead of aborting, and small helpers shared by the test programs. Header-only.
 */
#ifndef FERROLOOP_TEST_CHECK_H
#define FERROLOOP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferroloop.h"

static _Atomic int checks_run = 0; /* atomic: tools check from their own threads */
static _Atomic int checks_failed = 0; /* atomic: tools check from their own threads */

/* Prints the thread's last error message (for failure reports). */
static inline void print_last_error(void) {
    char message[512];
    size_t written = 0;
    fl_last_error_message(message, sizeof message, &written);
    fprintf(stderr, "    last error: %s\n", message);
}

#define CHECK(cond)                                                                \
    do {                                                                           \
        checks_run++;                                                              \
        if (!(cond)) {                                                             \
            checks_failed++;                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                          \
    } while (0)

#define CHECK_STATUS(expr, expected)                                               \
    do {                                                                           \
        fl_status check_status_ = (expr);                                          \
        checks_run++;                                                              \
        if (check_status_ != (expected)) {                                         \
            checks_failed++;                                                       \
            fprintf(stderr, "%s:%d: %s returned %d, expected %s (%d)\n", __FILE__,  \
                    __LINE__, #expr, (int)check_status_, #expected, (int)(expected)); \
            print_last_error();                                                    \
        }                                                                          \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, FL_STATUS_OK)

/* Compares a (pointer, length) text with a NUL-terminated string. */
static inline int text_equals(const char *text, size_t len, const char *expected) {
    return len == strlen(expected) && memcmp(text, expected, len) == 0;
}

/* The last error of this thread, copied into a static buffer. */
static inline const char *last_error(void) {
    static char message[1024];
    size_t written = 0;
    if (fl_last_error_message(message, sizeof message, &written) != FL_STATUS_OK) {
        return "(unreadable)";
    }
    return message;
}

/* The whole file at `path` (malloc'd, NUL-terminated for convenience); NULL on failure. */
static inline char *read_file(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    size_t capacity = 4096, used = 0;
    char *data = malloc(capacity);
    size_t got;
    while (data != NULL && (got = fread(data + used, 1, capacity - used - 1, file)) > 0) {
        used += got;
        if (capacity - used - 1 == 0) {
            char *bigger = realloc(data, capacity * 2);
            if (bigger == NULL) {
                free(data);
            }
            data = bigger;
            capacity *= 2;
        }
    }
    fclose(file);
    if (data != NULL) {
        data[used] = '\0';
        *len = used;
    }
    return data;
}

/* A growable byte buffer. */
typedef struct {
    char *data;
    size_t len;
    size_t capacity;
} buffer;

static inline void buffer_append(buffer *b, const char *text, size_t len) {
    if (b->len + len + 1 > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 256;
        while (capacity < b->len + len + 1) {
            capacity *= 2;
        }
        char *bigger = realloc(b->data, capacity);
        if (bigger == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        b->data = bigger;
        b->capacity = capacity;
    }
    memcpy(b->data + b->len, text, len);
    b->len += len;
    b->data[b->len] = '\0';
}

static inline void buffer_append_str(buffer *b, const char *text) { buffer_append(b, text, strlen(text)); }

static inline void buffer_free(buffer *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->capacity = 0;
}

/* Prints the summary line and returns the process exit code. */
static inline int check_summary(const char *program) {
    printf("%s: %d checks, %d failed\n", program, (int)checks_run, (int)checks_failed);
    return checks_failed == 0 ? 0 : 1;
}

#endif /* FERROLOOP_TEST_CHECK_H */
