/*
 * The floor of `mjf status` over a store: the system calls its safe-read rules make for
 * each job, made from C with nothing else - no interpreter, no parsing, no output.
 *
 *     status_syscalls JOBS_DIR COUNT
 *
 * JOBS_DIR holds the jobs 0 .. COUNT-1 the benchmark built (jobfeatures/ with four keys,
 * no state/, jobstatus/ with the nine keys). Per job, in the order `mjf status` makes
 * them (strace of one job; docs/performance.md): the job's directory opened without
 * following symlinks and its owner read; its jobfeatures/ opened so and, below root's
 * directory, its owner read (who may have written the values); the three keys the
 * figures use (not job_id: the directory's name is the job's) each opened, fstat'ed and
 * read; state/ looked for; jobstatus/ opened and fstat'ed; used_CPU opened, checked,
 * locked shared and checked again by name, then read; the other eight keys each opened,
 * fstat'ed and read. 61 calls a job (60 where the job's directory is not root's).
 *
 * The jobs are read in contiguous shares by as many processes as `mjf status` would use
 * (one per CPU this process may run on, at most one per 400 jobs), as it does. Exit 1
 * if any call that succeeds for `mjf status` on such a store fails here.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILE_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
#define DIR_FLAGS (O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY)
#define JOBS_PER_WORKER 400

static const char *const features[] = {"allocated_cpu", "jobstart_secs", "wall_limit_secs"};
static const char *const others[] = {"last_job_start", "first_exp_job_end",
                                     "last_exp_job_end", "last_max_job_end",
                                     "add_uncom_time", "add_final_exp_waste",
                                     "can_postpone_last_job", "priority_factor"};

/* A value file: opened, fstat'ed, read; -1 if any of it failed. */
static int read_value(int dir, const char *name, int positioned) {
    char buffer[4096];
    struct stat info;
    int fd = openat(dir, name, FILE_FLAGS);
    if (fd < 0)
        return -1;
    ssize_t got = fstat(fd, &info) == 0
        ? (positioned ? pread(fd, buffer, 41, 0) : read(fd, buffer, sizeof buffer)) : -1;
    close(fd);
    return got < 0 ? -1 : 0;
}

static int read_job(int jobs, const char *name) {
    struct stat info;
    int failed = 0;
    int top = openat(jobs, name, DIR_FLAGS);
    if (top < 0)
        return 1;
    failed |= fstat(top, &info);
    int root_owned = info.st_uid == 0;
    int feature_dir = openat(top, "jobfeatures", DIR_FLAGS);
    if (feature_dir < 0)
        return 1;
    if (root_owned)
        failed |= fstat(feature_dir, &info);
    for (size_t i = 0; i < sizeof features / sizeof *features; i++)
        failed |= read_value(feature_dir, features[i], 0);
    close(feature_dir);
    int state = openat(top, "state", DIR_FLAGS); /* absent in this store */
    if (state >= 0)
        close(state);
    int status_dir = openat(top, "jobstatus", DIR_FLAGS);
    close(top);
    if (status_dir < 0)
        return 1;
    failed |= fstat(status_dir, &info);
    int lock = openat(status_dir, "used_CPU", FILE_FLAGS);
    if (lock < 0)
        return 1;
    struct flock shared = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    char buffer[41];
    failed |= fstat(lock, &info) | fcntl(lock, F_SETLK, &shared)
        | fstatat(status_dir, "used_CPU", &info, AT_SYMLINK_NOFOLLOW) | fstat(lock, &info);
    failed |= pread(lock, buffer, sizeof buffer, 0) < 0;
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        failed |= read_value(status_dir, others[i], 1);
    close(lock);
    close(status_dir);
    return failed != 0;
}

static int read_share(int jobs, long first, long end) {
    char name[24];
    int failed = 0;
    for (long number = first; number < end; number++) {
        snprintf(name, sizeof name, "%ld", number);
        failed |= read_job(jobs, name);
    }
    return failed;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: status_syscalls JOBS_DIR COUNT\n");
        return 2;
    }
    long count = atol(argv[2]);
    int jobs = open(argv[1], DIR_FLAGS);
    if (jobs < 0) {
        perror(argv[1]);
        return 1;
    }
    cpu_set_t cpus;
    long processes = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    if (processes > count / JOBS_PER_WORKER)
        processes = count / JOBS_PER_WORKER;
    if (processes < 1)
        processes = 1;
    long size = (count + processes - 1) / processes;
    for (long start = size; start < count; start += size) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(read_share(jobs, start, start + size < count ? start + size : count));
    }
    int failed = read_share(jobs, 0, size < count ? size : count);
    int status;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
}
