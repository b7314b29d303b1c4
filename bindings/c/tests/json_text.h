/* JSON text helpers for the C tests: strip the whitespace of a pretty-printed document and
 * compare two compact documents with numbers by value (for the expected messages of
 * tests/decode/expected/). Header-only; include after check.h. */
#ifndef FERROLOOP_TEST_JSON_TEXT_H
#define FERROLOOP_TEST_JSON_TEXT_H

#include <stdbool.h>
#include <stdlib.h>

/* `json` without the whitespace outside strings (the expected files are pretty-printed; the
 * decoder writes compact JSON with the same key order). malloc'd. */
static char *strip_json(const char *json, size_t len) {
    char *out = malloc(len + 1);
    size_t n = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (in_string) {
            out[n++] = c;
            if (c == '\\' && i + 1 < len) {
                out[n++] = json[++i];
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
            out[n++] = c;
        } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            out[n++] = c;
        }
    }
    out[n] = '\0';
    return out;
}

/* Whether two stripped JSON texts are equal, numbers compared by value (`3.4e-06`,
 * `0.0000034` and `3.4E-6` are one number: the expectations were written by another JSON
 * library). */
static bool json_equal(const char *a, const char *b) {
    bool in_string = false;
    while (*a != '\0' && *b != '\0') {
        bool number_a = *a == '-' || (*a >= '0' && *a <= '9');
        bool number_b = *b == '-' || (*b >= '0' && *b <= '9');
        if (!in_string && number_a && number_b) {
            char *end_a, *end_b;
            if (strtod(a, &end_a) != strtod(b, &end_b)) {
                return false;
            }
            a = end_a;
            b = end_b;
            continue;
        }
        if (*a != *b) {
            return false;
        }
        if (in_string && *a == '\\') {
            a++;
            b++;
            if (*a != *b || *a == '\0') {
                return *a == *b;
            }
        } else if (*a == '"') {
            in_string = !in_string;
        }
        a++;
        b++;
    }
    return *a == *b;
}

#endif
