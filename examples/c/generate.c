/* Loads a Hugging Face model folder through torch-magpie's C ABI and greedy-generates after the
 * given token ids, streaming each token through a callback; with expected ids, checks them.
 *
 *   cc examples/c/generate.c -I crates/magpie-ffi/include target/release/libmagpie_ffi.a \
 *      -lpthread -ldl -lm -o generate
 *   ./generate MODEL_DIR N_NEW PROMPT_IDS [EXPECTED_IDS]      (ids comma-separated)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "magpie.h"

#define F32 8
#define CPU (-1)

static size_t parse_ids(const char *s, int64_t *out, size_t cap) {
    size_t n = 0;
    char *end;
    while (*s && n < cap) {
        out[n++] = strtoll(s, &end, 10);
        if (end == s) return 0;
        s = (*end == ',') ? end + 1 : end;
    }
    return n;
}

static int32_t on_token(void *user, int64_t token) {
    int *count = (int *)user;
    printf("%s%lld", *count ? " " : "", (long long)token);
    fflush(stdout);
    (*count)++;
    return 0; /* go on */
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL_DIR N_NEW PROMPT_IDS [EXPECTED_IDS]\n", argv[0]);
        return 2;
    }
    int64_t prompt[4096], expected[4096], got[4096];
    size_t n_prompt = parse_ids(argv[3], prompt, 4096);
    size_t n_expected = argc > 4 ? parse_ids(argv[4], expected, 4096) : 0;
    int64_t model = 0;
    if (magpie_model_load(argv[1], CPU, F32, &model) != MAGPIE_OK) {
        fprintf(stderr, "%s\n", magpie_last_error());
        return 1;
    }
    int count = 0;
    size_t n_got = 0;
    if (magpie_model_generate(model, prompt, n_prompt, (size_t)atoi(argv[2]), 0.0, 0, 1.0, 0, on_token, &count, got, 4096, &n_got) != MAGPIE_OK) {
        fprintf(stderr, "\n%s\n", magpie_last_error());
        return 1;
    }
    printf("\n");
    size_t live = 0;
    if (magpie_release(model) != MAGPIE_OK || magpie_live_handles(&live) != MAGPIE_OK || live != 0) {
        fprintf(stderr, "the model was not released cleanly (%zu handles live)\n", live);
        return 1;
    }
    if (n_expected) {
        if (n_got != n_expected || memcmp(got, expected, n_got * sizeof(int64_t)) != 0) {
            fprintf(stderr, "generated ids differ from the expected ones\n");
            return 1;
        }
        printf("matches the expected %zu tokens\n", n_expected);
    }
    return 0;
}
