#define _GNU_SOURCE
/* net_prefork.c - DITTO_NET_PREFORK (nginx's model): a master process that only supervises, and
 * N worker processes that each run one epoll loop over the shared listening socket.
 *
 * The listening socket is registered with EPOLLEXCLUSIVE so a new connection wakes one worker,
 * not all of them (nginx does the same where the kernel supports it). The master forks while it
 * is still single-threaded, then waits for signals with sigwaitinfo: SIGINT/SIGTERM stop the
 * workers (SIGTERM, then SIGKILL after 5 s), SIGCHLD of a worker that was not asked to stop
 * stops the clone with status 1, because a clone serving with fewer workers than its profile
 * says would measure something else. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ditto_internal.h"

#define STOP_GRACE_S 5

static _Noreturn void worker_process(struct ditto_rt *rt, uint32_t index, const sigset_t *orig,
                                     pid_t master)
{
    rt->process_index = index;
    /* A master that dies without stopping its workers (SIGKILL) must not leave them serving on
     * the port: the kernel sends SIGTERM to each. getppid() catches a master that died before
     * the request took effect. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != master)
        _exit(1);
    /* A fresh stop eventfd: the master's would wake the master and the other workers. */
    if (ditto_signals_init() != 0) {
        ditto_warn("worker %u: cannot set up signal handling: %s", index, strerror(errno));
        _exit(1);
    }
    sigprocmask(SIG_SETMASK, orig, NULL);
    int status = 1;
    if (ditto_process_init(rt) == 0) {
        struct ditto_background *bg = ditto_background_start(rt);
        status = ditto_epoll_serve(rt, 1);
        ditto_background_stop(bg);
        ditto_process_free(rt);
    }
    /* Release what the master set up (the master removes the data dir). */
    close(rt->listen_fd);
    ditto_datadir_destroy(&rt->data, 0);
    ditto_signals_close();
    free(rt->pattern);
    exit(status);
}

static void reap(pid_t *pids, uint32_t n, uint32_t *alive, int stopping, int *status)
{
    for (;;) {
        int ws;
        pid_t pid = waitpid(-1, &ws, WNOHANG);
        if (pid <= 0)
            return;
        for (uint32_t i = 0; i < n; i++) {
            if (pids[i] != pid)
                continue;
            pids[i] = 0;
            (*alive)--;
            int ok = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
            if (!stopping) {
                ditto_warn("worker process %u (pid %d) exited unexpectedly (%s %d); stopping",
                           i, (int)pid, WIFEXITED(ws) ? "status" : "signal",
                           WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
                *status = 1;
            } else if (!ok) {
                ditto_warn("worker process %u (pid %d) did not stop cleanly (%s %d)", i,
                           (int)pid, WIFEXITED(ws) ? "status" : "signal",
                           WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
                *status = 1;
            }
        }
    }
}

int ditto_net_prefork(struct ditto_rt *rt)
{
    uint32_t n = rt->workers;
    pid_t *pids = calloc(n, sizeof *pids);
    if (pids == NULL)
        return 1;
    sigset_t set, orig;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    /* Blocked before the first fork, so no signal can slip between fork and sigwaitinfo. */
    sigprocmask(SIG_BLOCK, &set, &orig);
    int status = 0, stopping = 0;
    uint32_t alive = 0;
    pid_t master = getpid();
    for (uint32_t i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            free(pids);
            worker_process(rt, i, &orig, master);
        }
        if (pid < 0) {
            ditto_warn("cannot start worker process %u of %u: %s", i, n, strerror(errno));
            status = 1;
            stopping = 1;
            break;
        }
        pids[i] = pid;
        alive++;
    }
    if (!stopping)
        ditto_announce(rt);
    while (!stopping && alive > 0) {
        siginfo_t info;
        int sig = sigwaitinfo(&set, &info);
        if (sig < 0)
            continue;
        if (sig == SIGCHLD) {
            reap(pids, n, &alive, 0, &status);
            if (status != 0)
                stopping = 1;
        } else {
            stopping = 1;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += STOP_GRACE_S;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (alive > 0) {
        reap(pids, n, &alive, 1, &status);
        if (alive == 0)
            break;
        struct timespec now, left;
        clock_gettime(CLOCK_MONOTONIC, &now);
        left.tv_sec = deadline.tv_sec - now.tv_sec;
        left.tv_nsec = deadline.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) {
            left.tv_nsec += 1000000000L;
            left.tv_sec--;
        }
        if (left.tv_sec < 0) {
            ditto_warn("%u worker process(es) ignored SIGTERM for %d s; killing them", alive,
                       STOP_GRACE_S);
            for (uint32_t i = 0; i < n; i++)
                if (pids[i] > 0)
                    kill(pids[i], SIGKILL);
            status = 1;
            while (alive > 0) {
                int ws;
                pid_t pid = waitpid(-1, &ws, 0);
                if (pid < 0 && errno != EINTR)
                    break;
                for (uint32_t i = 0; pid > 0 && i < n; i++)
                    if (pids[i] == pid) {
                        pids[i] = 0;
                        alive--;
                    }
            }
            break;
        }
        siginfo_t info;
        (void)sigtimedwait(&chld, &info, &left);
    }
    sigprocmask(SIG_SETMASK, &orig, NULL);
    free(pids);
    return status;
}
