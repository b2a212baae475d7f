/* Misuse of torch-magpie's C ABI must give error codes and messages, never a crash: double
 * release, stale and forged handles, wrong handle kinds, null pointers, wrong lengths, bad codes,
 * bad JSON, failing ops, a closed no-grad scope. Exits 0 when every case behaves.
 *
 *   cc examples/c/misuse.c -I crates/magpie-ffi/include target/release/libmagpie_ffi.a \
 *      -lpthread -ldl -lm -o misuse && ./misuse
 */
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include "magpie.h"

static int failures = 0;

static void expect(int32_t rc, int32_t want, const char *needle, const char *what) {
    const char *msg = magpie_last_error();
    if (rc != want || (needle && !strstr(msg, needle))) {
        printf("FAIL %s: rc %d (want %d), message \"%s\" (want \"%s\")\n", what, rc, want, msg, needle ? needle : "");
        failures++;
    } else {
        printf("ok   %s: %s\n", what, msg);
    }
}

int main(void) {
    float data[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3}, t = 0, u = 0, out = 0;
    size_t n = 0;
    expect(magpie_tensor_from_data(data, sizeof data, 8, shape, 2, -1, &t), MAGPIE_OK, NULL, "make a tensor");
    expect(magpie_release(t), MAGPIE_OK, NULL, "release it");
    expect(magpie_release(t), MAGPIE_ERR_ARG, "stale", "double release");
    expect(magpie_add(t, t, &out), MAGPIE_ERR_ARG, "stale", "use after release");
    expect(magpie_release(0), MAGPIE_ERR_ARG, "not a handle", "handle 0");
    expect(magpie_release(123456789), MAGPIE_ERR_ARG, NULL, "forged handle");
    expect(magpie_release(-5), MAGPIE_ERR_ARG, "not a handle", "negative handle");
    expect(magpie_tensor_from_data(data, sizeof data - 4, 8, shape, 2, -1, &t), MAGPIE_ERR_ARG, "bytes", "wrong byte count");
    expect(magpie_tensor_from_data(NULL, sizeof data, 8, shape, 2, -1, &t), MAGPIE_ERR_ARG, "null", "null data");
    expect(magpie_tensor_from_data(data, sizeof data, 8, shape, 2, -1, NULL), MAGPIE_ERR_ARG, "null", "null out");
    expect(magpie_tensor_from_data(data, sizeof data, 99, shape, 2, -1, &t), MAGPIE_ERR_ARG, "dtype code", "bad dtype code");
    expect(magpie_tensor_from_data(data, sizeof data, 8, shape, 2, -7, &t), MAGPIE_ERR_ARG, "device code", "bad device code");
    expect(magpie_tensor_from_data(data, sizeof data, 8, shape, 2, -1, &t), MAGPIE_OK, NULL, "make a tensor again");
    expect(magpie_retain(t), MAGPIE_OK, NULL, "retain");
    expect(magpie_release(t), MAGPIE_OK, NULL, "release one reference");
    expect(magpie_tensor_ndim(t, &n), MAGPIE_OK, NULL, "still alive after one of two releases");
    int64_t dims[1];
    expect(magpie_tensor_shape(t, dims, 1), MAGPIE_ERR_ARG, "dimensions", "shape buffer too small");
    float small[2];
    expect(magpie_tensor_to_host(t, small, sizeof small), MAGPIE_ERR_ARG, "bytes", "host buffer too small");
    expect(magpie_matmul(t, t, &out), MAGPIE_ERR_OP, "matmul", "op error: [2,3] @ [2,3]");
    expect(magpie_call("no_such_op", NULL, NULL, 0, &out, 1, &n, NULL, 0, NULL), MAGPIE_ERR_OP, "no_such_op", "unknown op");
    expect(magpie_call("add", "{not json", &t, 1, &out, 1, &n, NULL, 0, NULL), MAGPIE_ERR_ARG, "JSON", "bad JSON");
    expect(magpie_call("add", "{\"args\": [{\"tensor\": 5}, 1]}", &t, 1, &out, 1, &n, NULL, 0, NULL), MAGPIE_ERR_ARG, "out of range", "tensor index out of range");
    char js[4];
    expect(magpie_call("add", "{\"args\": [{\"tensor\": 0}, 1]}", &t, 1, &out, 1, &n, js, sizeof js, NULL), MAGPIE_ERR_ARG, "out_json", "result JSON buffer too small");
    expect(magpie_call("add", "{\"args\": [{\"tensor\": 0}, 1]}", &t, 1, &out, 0, &n, NULL, 0, NULL), MAGPIE_ERR_ARG, "out_tensors", "no room for the result");
    expect(magpie_model_forward(t, t, 0, &out), MAGPIE_ERR_ARG, "not a model", "a tensor used as a model");
    expect(magpie_optimizer_step(t), MAGPIE_ERR_ARG, "not an optimizer", "a tensor used as an optimizer");
    expect(magpie_model_load("/nonexistent/model", -1, 8, &u), MAGPIE_ERR_OP, "not a folder", "missing model folder");
    expect(magpie_optimizer_new("adamw", &t, 1, "{\"lr\": 0.1, \"bogus\": 1}", &u), MAGPIE_ERR_ARG, "bogus", "unknown hyperparameter");
    expect(magpie_optimizer_new("rmsnope", &t, 1, NULL, &u), MAGPIE_ERR_ARG, "unknown optimizer", "unknown optimizer");
    expect(magpie_no_grad_end(), MAGPIE_ERR_ARG, "no no-grad scope", "closing a scope never opened");
    expect(magpie_backward(t), MAGPIE_ERR_OP, NULL, "backward of a tensor without grad");
    expect(magpie_release(t), MAGPIE_OK, NULL, "last release");
    size_t live = 99;
    expect(magpie_live_handles(&live), MAGPIE_OK, NULL, "count live handles");
    if (live != 0) {
        printf("FAIL %zu handles still live after releasing everything\n", live);
        failures++;
    }
    printf("%s (%d failures)\n", failures ? "FAILED" : "all misuse handled", failures);
    return failures ? 1 : 0;
}
