/* DESIGN: corpus replayer for the fuzz drivers.
 *
 * Each tests/fuzz/fuzz-<parser>.c defines LLVMFuzzerTestOneInput. Under the fuzz preset clang's
 * libFuzzer supplies main(); everywhere else this file does, so ctest replays every checked-in
 * corpus file through the same driver on each run (label fuzz) under the dev sanitizers.
 * Arguments are files or directories (one level deep). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KP_REPLAY_MAX_INPUT (4u << 20)

static int replay_file(const char *path, unsigned *count)
{
    uint8_t *data;
    size_t len = 0;
    struct stat st;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > KP_REPLAY_MAX_INPUT) {
        close(fd);
        return 0;
    }
    data = malloc((size_t)st.st_size + 1);
    if (!data) {
        close(fd);
        return 1;
    }
    while (len < (size_t)st.st_size) {
        ssize_t n = read(fd, data + len, (size_t)st.st_size - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    (*count)++;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    int bad = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        DIR *d;
        struct dirent *e;

        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += replay_file(argv[i], &count);
            continue;
        }
        d = opendir(argv[i]);
        if (!d) {
            bad++;
            continue;
        }
        while ((e = readdir(d))) {
            char path[4096];

            if (e->d_name[0] == '.')
                continue;
            if (snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name) >= (int)sizeof(path))
                continue;
            bad += replay_file(path, &count);
        }
        closedir(d);
    }
    if (count == 0) {
        fprintf(stderr,
                "replay: no corpus inputs found: a driver without a corpus tests nothing\n");
        return 1;
    }
    printf("replayed %u inputs\n", count);
    return bad ? 1 : 0;
}
