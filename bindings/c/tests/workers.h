/* Worker threads for the C tests whose tools answer from another thread: started with
 * start_worker, joined with join_workers at the end of each scenario, so valgrind sees no
 * leaks; and the wait for a forked child (child_exited_cleanly). Include after check.h (it
 * counts a thread that cannot start as a failed check). */
#ifndef FERROLOOP_TEST_WORKERS_H
#define FERROLOOP_TEST_WORKERS_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#define MAX_WORKERS 64
static pthread_t workers[MAX_WORKERS];
static int worker_count = 0;
static pthread_mutex_t workers_lock = PTHREAD_MUTEX_INITIALIZER;

static void start_worker(void *(*body)(void *), void *arg) {
    pthread_mutex_lock(&workers_lock);
    if (worker_count < MAX_WORKERS && pthread_create(&workers[worker_count], NULL, body, arg) == 0) {
        worker_count++;
    } else {
        checks_failed++;
        fprintf(stderr, "cannot start a worker thread\n");
    }
    pthread_mutex_unlock(&workers_lock);
}

static void join_workers(void) {
    pthread_mutex_lock(&workers_lock);
    for (int i = 0; i < worker_count; i++) {
        pthread_join(workers[i], NULL);
    }
    worker_count = 0;
    pthread_mutex_unlock(&workers_lock);
}

static void sleep_ms(long ms) {
    struct timespec delay = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&delay, NULL);
}

/* Waits up to guard_ms for a forked child; one that is still running then is reported as hung
 * and killed (a hung free in it would wait forever). True when it exited with status 0. */
static inline int child_exited_cleanly(pid_t child, int guard_ms) {
    int status = 0;
    int exited = 0;
    for (int waited = 0; child > 0 && waited < guard_ms && !exited; waited += 10) {
        exited = waitpid(child, &status, WNOHANG) == child;
        if (!exited) sleep_ms(10);
    }
    if (child > 0 && !exited) {
        fprintf(stderr, "    the forked child hung\n");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    return exited && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#endif
