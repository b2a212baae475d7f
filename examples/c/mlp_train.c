/* Trains a 2-16-1 MLP on XOR through torch-magpie's C ABI: tensors from host buffers, ops by name
 * (magpie_call) and typed shortcuts, autograd, AdamW by name. Prints the loss every 100 steps and
 * exits 0 when the final loss is below 0.01 and every prediction is on the right side of 0.5.
 *
 *   cc examples/c/mlp_train.c -I crates/magpie-ffi/include target/release/libmagpie_ffi.a \
 *      -lpthread -ldl -lm -o mlp_train && ./mlp_train
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include "magpie.h"

#define F32 8
#define CPU (-1)

static void check(int32_t rc, const char *what) {
    if (rc != MAGPIE_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, rc, magpie_last_error());
        exit(1);
    }
}

static int64_t tensor(const float *data, int64_t rows, int64_t cols) {
    int64_t shape[2] = {rows, cols}, h = 0;
    check(magpie_tensor_from_data(data, sizeof(float) * rows * cols, F32, shape, 2, CPU, &h), "tensor_from_data");
    return h;
}

/* out = op(a) through the generic call */
static int64_t call1(const char *op, int64_t a) {
    int64_t out = 0;
    size_t n = 0;
    check(magpie_call(op, "{\"args\": [{\"tensor\": 0}]}", &a, 1, &out, 1, &n, NULL, 0, NULL), op);
    return out;
}

/* p = sigmoid(tanh(X W1 + b1) W2 + b2); the intermediate handles go to tmp[0..5], p is tmp[5] */
static int64_t forward(int64_t X, const int64_t *params, int64_t *tmp) {
    check(magpie_matmul(X, params[0], &tmp[0]), "matmul");
    check(magpie_add(tmp[0], params[1], &tmp[1]), "add");
    tmp[2] = call1("tanh", tmp[1]);
    check(magpie_matmul(tmp[2], params[2], &tmp[3]), "matmul");
    check(magpie_add(tmp[3], params[3], &tmp[4]), "add");
    tmp[5] = call1("sigmoid", tmp[4]);
    return tmp[5];
}

int main(void) {
    const float x[8] = {0, 0, 0, 1, 1, 0, 1, 1};
    const float y[4] = {0, 1, 1, 0};
    /* a fixed pseudo-random start (a linear congruential generator), so the run is reproducible */
    float w1[2 * 16], b1[16] = {0}, w2[16], b2[1] = {0};
    uint32_t s = 12345;
    for (int i = 0; i < 32; i++) { s = s * 1664525u + 1013904223u; w1[i] = ((s >> 8) / 16777216.0f - 0.5f) * 2.0f; }
    for (int i = 0; i < 16; i++) { s = s * 1664525u + 1013904223u; w2[i] = ((s >> 8) / 16777216.0f - 0.5f) * 0.5f; }

    int64_t X = tensor(x, 4, 2), Y = tensor(y, 4, 1);
    int64_t params[4] = {tensor(w1, 2, 16), tensor(b1, 1, 16), tensor(w2, 16, 1), tensor(b2, 1, 1)};
    for (int i = 0; i < 4; i++) check(magpie_set_requires_grad(params[i], 1), "set_requires_grad");
    int64_t opt = 0;
    check(magpie_optimizer_new("adamw", params, 4, "{\"lr\": 0.05, \"weight_decay\": 0.0}", &opt), "optimizer_new");

    double loss_value = 0;
    for (int step = 1; step <= 500; step++) {
        int64_t tmp[7];
        int64_t pair[2] = {forward(X, params, tmp), Y};
        size_t n = 0;
        check(magpie_call("nn.functional.mse_loss", "{\"args\": [{\"tensor\": 0}, {\"tensor\": 1}]}", pair, 2, &tmp[6], 1, &n, NULL, 0, NULL), "mse_loss");
        check(magpie_optimizer_zero_grad(opt), "zero_grad");
        check(magpie_backward(tmp[6]), "backward");
        check(magpie_optimizer_step(opt), "step");
        check(magpie_tensor_item(tmp[6], &loss_value), "item");
        if (step % 100 == 0) printf("step %3d  loss %.6f\n", step, loss_value);
        for (int i = 0; i < 7; i++) check(magpie_release(tmp[i]), "release");
    }

    /* predictions without gradient tracking */
    int64_t tmp[6];
    check(magpie_no_grad_begin(), "no_grad_begin");
    int64_t p = forward(X, params, tmp);
    check(magpie_no_grad_end(), "no_grad_end");
    float pred[4];
    check(magpie_tensor_to_host(p, pred, sizeof pred), "to_host");
    int ok = loss_value < 0.01;
    for (int i = 0; i < 4; i++) {
        printf("xor(%g, %g) = %.3f (want %g)\n", x[2 * i], x[2 * i + 1], pred[i], y[i]);
        if ((pred[i] > 0.5f) != (y[i] > 0.5f)) ok = 0;
    }
    printf("final loss %.6f: %s\n", loss_value, ok ? "learned XOR" : "did not learn XOR");
    int64_t all[] = {tmp[0], tmp[1], tmp[2], tmp[3], tmp[4], tmp[5], X, Y, params[0], params[1], params[2], params[3], opt};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) check(magpie_release(all[i]), "release");
    size_t live = 0;
    check(magpie_live_handles(&live), "live_handles");
    if (live != 0) {
        printf("%zu handles leaked\n", live);
        ok = 0;
    }
    return ok ? 0 : 1;
}
