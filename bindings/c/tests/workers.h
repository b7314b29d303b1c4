/* Worker threads for the C tests whose tools answer from another thread: started with
 * start_worker, joined with join_workers at the end of each scenario, so valgrind sees no
 * leaks. Include after check.h (it counts a thread that cannot start as a failed check). */
#ifndef FERROLOOP_TEST_WORKERS_H
#define FERROLOOP_TEST_WORKERS_H

#include <pthread.h>
#include <stdio.h>
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

#endif
