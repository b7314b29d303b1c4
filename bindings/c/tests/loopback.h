/* A loopback HTTP server for the C tests of the client and the agent: a forked child
 * answering canned replies on 127.0.0.1, one connection per reply, in order, and recording
 * every request it receives. Include after check.h (it uses its buffer). No network beyond
 * loopback; its timeouts are hang guards only. */
#ifndef FERROLOOP_TEST_LOOPBACK_H
#define FERROLOOP_TEST_LOOPBACK_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long anything may take before the test calls it a hang (valgrind is slow). */
#define HANG_GUARD_MS 60000

/* ---- the loopback server ---- */

typedef struct {
    const char *status; /* "200 OK"; NULL: no answer, the connection held until the client
                         * closes it (then CLOSED_MARK is recorded) */
    const char *content_type;
    const char *body;
    size_t cut_at; /* 0: the whole body; else only its first cut_at bytes are sent (the
                    * content-length still announces the whole), then the connection closes */
} reply;

typedef struct {
    pid_t pid;
    int port;
    int requests_fd; /* reads every request received, each after REQUEST_MARK, from an
                      * unlinked file the server appends to (at its end: read returns 0) */
} server;

#define REQUEST_MARK "\n=== request ===\n"
#define CLOSED_MARK "\n=== closed by the client ===\n"

static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The child: answers one connection per reply, in order, then exits. Static buffers only (the
 * child runs under valgrind too). */
static void serve(int listener, int requests_fd, const reply *replies, int count) {
    static char request[1 << 16];
    static char head[512];
    for (int i = 0; i < count; i++) {
        struct pollfd ready = {listener, POLLIN, 0};
        if (poll(&ready, 1, HANG_GUARD_MS) <= 0) _exit(3); /* the test never came: hang guard */
        int conn = accept(listener, NULL, NULL);
        if (conn < 0) _exit(4);
        size_t used = 0;
        long body_len = -1;
        size_t head_end = 0;
        for (;;) {
            ssize_t n = read(conn, request + used, sizeof request - 1 - used);
            if (n <= 0) break;
            used += (size_t)n;
            request[used] = '\0';
            if (head_end == 0) {
                char *end = strstr(request, "\r\n\r\n");
                if (end == NULL) continue;
                head_end = (size_t)(end - request) + 4;
                body_len = 0;
                for (char *line = request; line < end; line = strstr(line, "\r\n") + 2) {
                    if (strncasecmp(line, "content-length:", 15) == 0) body_len = atol(line + 15);
                }
            }
            if (used >= head_end + (size_t)body_len) break;
        }
        write_all(requests_fd, REQUEST_MARK, strlen(REQUEST_MARK));
        write_all(requests_fd, request, used);
        const reply *r = &replies[i];
        if (r->status == NULL) {
            struct pollfd held = {conn, POLLIN, 0};
            while (poll(&held, 1, HANG_GUARD_MS) > 0) {
                if (read(conn, request, sizeof request) <= 0) {
                    write_all(requests_fd, CLOSED_MARK, strlen(CLOSED_MARK));
                    break;
                }
            }
            close(conn);
            continue;
        }
        int head_len = snprintf(head, sizeof head,
                                "HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
                                "request-id: req_test_%d\r\nconnection: close\r\n\r\n",
                                r->status, r->content_type, strlen(r->body), i);
        write_all(conn, head, (size_t)head_len);
        size_t body_len_sent = r->cut_at != 0 ? r->cut_at : strlen(r->body);
        write_all(conn, r->body, body_len_sent);
        shutdown(conn, SHUT_WR);
        /* Wait for the client to close, so that it has read everything. */
        struct pollfd closed = {conn, POLLIN, 0};
        while (poll(&closed, 1, HANG_GUARD_MS) > 0 && read(conn, request, sizeof request) > 0) {
        }
        close(conn);
    }
    _exit(0);
}

/* Forks a server answering `replies`; call before the process has any thread. */
static server start_server(const reply *replies, int count) {
    server s = {-1, 0, -1};
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t address_len = sizeof address;
    /* The request log is a file, not a pipe: a test reads it when it needs to, mostly once the
     * server is gone, and a pipe would block the server once a test's requests passed its
     * capacity (64 KiB). Two descriptions of one file, each with its own offset: the child
     * writes through one, the parent reads through the other. */
    const char *dir = getenv("TMPDIR");
    char log_path[1024];
    snprintf(log_path, sizeof log_path, "%s/ferroloop-loopback-XXXXXX",
             dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    int log_fd = mkstemp(log_path);
    int read_fd = log_fd >= 0 ? open(log_path, O_RDONLY) : -1;
    if (log_fd >= 0) unlink(log_path);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 8) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &address_len) != 0 || read_fd < 0) {
        fprintf(stderr, "cannot start the loopback server\n");
        exit(2);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "cannot fork\n");
        exit(2);
    }
    if (pid == 0) {
        close(read_fd);
        serve(listener, log_fd, replies, count);
    }
    close(listener);
    close(log_fd);
    s.pid = pid;
    s.port = ntohs(address.sin_port);
    s.requests_fd = read_fd;
    return s;
}

/* Stops the server and returns every request it received that was not read yet (malloc'd,
 * NUL-terminated). */
static char *stop_server(server *s) {
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    buffer requests = {0};
    char chunk[4096];
    ssize_t n;
    while ((n = read(s->requests_fd, chunk, sizeof chunk)) > 0) buffer_append(&requests, chunk, (size_t)n);
    close(s->requests_fd);
    if (requests.data == NULL) buffer_append_str(&requests, "");
    return requests.data;
}

/* Splits `requests` (from stop_server) in place into its requests; returns how many, at most
 * `max`, and points `each[i]` at request i (NUL-terminated). */
static int split_requests(char *requests, const char *each[], int max) {
    int count = 0;
    char *at = strstr(requests, REQUEST_MARK);
    while (at != NULL && count < max) {
        *at = '\0'; /* ends the previous request */
        at += strlen(REQUEST_MARK);
        each[count++] = at;
        at = strstr(at, REQUEST_MARK);
    }
    return count;
}

#endif
