/* One pass of the C API's SSE parser over a stream file, for instruction counts
 * (benches/callgrind-c-sse.sh): the same chunks fed with fl_sse_parser_feed + fl_sse_parser_next
 * (the chunk copied into the parser) or with fl_sse_parser_feed_each (read in place), every
 * event's data touched the same way by the consumer.
 *
 * Usage: sse_feed none|feed-next|feed-each CHUNK FILE
 * `none` reads the file and walks its chunks without parsing: the baseline to subtract. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferroloop.h"

typedef struct {
    size_t events;
    size_t data_bytes;
    unsigned checksum;
} tally;

static void count(tally *t, const fl_sse_item *item) {
    if (item->kind != FL_SSE_ITEM_EVENT) {
        return;
    }
    t->events++;
    t->data_bytes += item->event.data_len;
    if (item->event.data_len > 0) {
        t->checksum += (unsigned char)item->event.data[item->event.data_len - 1];
    }
}

static int on_item(void *userdata, const fl_sse_item *item) {
    count(userdata, item);
    return 0;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    size_t cap = 1 << 20, used = 0;
    unsigned char *data = malloc(cap);
    size_t n;
    while (data != NULL && (n = fread(data + used, 1, cap - used, file)) > 0) {
        used += n;
        if (used == cap) {
            unsigned char *grown = realloc(data, cap *= 2);
            if (grown == NULL) {
                free(data);
                data = NULL;
            }
            data = grown;
        }
    }
    fclose(file);
    *len = used;
    return data;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s none|feed-next|feed-each CHUNK FILE\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    size_t chunk = strtoul(argv[2], NULL, 10);
    size_t len = 0;
    unsigned char *data = read_all(argv[3], &len);
    if (data == NULL || chunk == 0) {
        fprintf(stderr, "cannot read %s (or CHUNK is 0)\n", argv[3]);
        return 2;
    }
    /* The consumer's buffer: each chunk is copied into it, as a read() into a reused buffer. */
    unsigned char *buf = malloc(chunk);
    fl_sse_parser *parser = NULL;
    if (buf == NULL || fl_sse_parser_new(&parser) != FL_STATUS_OK) {
        return 2;
    }
    tally t = {0};
    int each = strcmp(mode, "feed-each") == 0;
    int next = strcmp(mode, "feed-next") == 0;
    for (size_t at = 0; at < len; at += chunk) {
        size_t n = len - at < chunk ? len - at : chunk;
        memcpy(buf, data + at, n);
        if (each) {
            if (fl_sse_parser_feed_each(parser, buf, n, on_item, &t) != FL_STATUS_OK) {
                return 1;
            }
        } else if (next) {
            if (fl_sse_parser_feed(parser, buf, n) != FL_STATUS_OK) {
                return 1;
            }
            fl_sse_item item;
            while (fl_sse_parser_next(parser, &item) == FL_STATUS_OK &&
                   item.kind != FL_SSE_ITEM_NONE) {
                count(&t, &item);
            }
        } else {
            t.checksum += buf[n - 1];
        }
    }
    printf("%s chunk %zu: %zu events, %zu data bytes, checksum %u\n", mode, chunk, t.events,
           t.data_bytes, t.checksum);
    fl_sse_parser_free(parser);
    free(buf);
    free(data);
    return 0;
}
