/* Runs a fuzz target's entry point over files and directories of inputs without
 * libFuzzer, so ordinary builds replay the committed corpus as a regression test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_target.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        perror(path);
        if (f != NULL)
            fclose(f);
        return -1;
    }
    data = malloc((size_t)n + 1); /* +1: malloc(0) may return NULL */
    if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        free(data);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)n);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 0;
    int i;

    for (i = 1; i < argc; i++) {
        struct stat st;
        DIR *d;
        struct dirent *de;

        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 1;
            runs++;
            continue;
        }
        d = opendir(argv[i]);
        if (d == NULL) {
            perror(argv[i]);
            return 1;
        }
        while ((de = readdir(d)) != NULL) {
            char path[4096];

            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            if (run_file(path) != 0) {
                closedir(d);
                return 1;
            }
            runs++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", runs);
    return runs > 0 ? 0 : 1; /* an empty corpus would make this test vacuous */
}
