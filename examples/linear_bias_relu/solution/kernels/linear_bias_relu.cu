// y = relu(x @ W^T + b) with cuBLASLt, fp32 in, fp32 compute, fp32 out.
//
// Layout: torch tensors are row-major; cuBLASLt is column-major. A row-major
// [R, C] buffer is the same bytes as a column-major [C, R] matrix, so
//   x  [M, K] row-major  == X' [K, M] column-major (ld K)
//   W  [N, K] row-major  == W' [K, N] column-major (ld K)
//   y  [M, N] row-major  == Y' [N, M] column-major (ld N)
// and y = x W^T becomes Y' = (W')^T X': A = W' with op T, B = X' with op N,
// m = N, n = M, k = K. The bias has one entry per row of Y' (length N), which
// is what CUBLASLT_EPILOGUE_RELU_BIAS broadcasts: D = relu(alpha*op(A)op(B) + bias).
//
// The handle and, per (device, shape, pointer alignment), the descriptors and
// the heuristic's algorithm are created once and cached; each call only sets
// the bias pointer and enqueues the matmul on the caller's stream.
//
// Fallback plan (not implemented; for a GPU/driver whose heuristic returns no
// algorithm with this epilogue): the same Lt matmul with CUBLASLT_EPILOGUE_DEFAULT
// (or cublasSgemm with CUBLAS_DEFAULT_MATH) writing y, then one elementwise
// kernel y = max(y + b[col], 0) with float4 loads: one extra read+write of y.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <vector>

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // 32 MiB
constexpr int kMaxDevices = 64;

struct Plan {
  int device, m, n, k;
  int align_a, align_b, align_d, align_bias;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo;
};

std::mutex g_mutex;
cublasLtHandle_t g_handles[kMaxDevices] = {};
std::vector<Plan> g_plans;  // a handful of shapes per process; linear search

int pointer_alignment(const void* p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 4 && (v % a) != 0) a >>= 1;
  return a;
}

// Writes "<what>: <status>" into err and returns non-zero when st is an error.
int fail(cublasStatus_t st, const char* what, char* err, int err_len) {
  if (st == CUBLAS_STATUS_SUCCESS) return 0;
  if (err && err_len > 0)
    snprintf(err, err_len, "%s failed: %s (cublasStatus %d)", what, cublasLtGetStatusName(st), (int)st);
  return (int)st;
}

// bias: the first call's bias pointer; the heuristic reads its alignment
// (plans are keyed on that alignment, each call sets its own pointer).
int build_plan(cublasLtHandle_t h, Plan& p, const float* bias, char* err, int err_len) {
  cublasStatus_t st;
  st = cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (int rc = fail(st, "cublasLtMatmulDescCreate", err, err_len)) return rc;
  cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  st = cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t));
  if (int rc = fail(st, "set TRANSA", err, err_len)) return rc;
  st = cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n));
  if (int rc = fail(st, "set TRANSB", err, err_len)) return rc;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
  st = cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  if (int rc = fail(st, "set EPILOGUE=RELU_BIAS", err, err_len)) return rc;
  cudaDataType_t bias_type = CUDA_R_32F;
  st = cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                      sizeof(bias_type));
  if (int rc = fail(st, "set BIAS_DATA_TYPE", err, err_len)) return rc;
  st = cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (int rc = fail(st, "set BIAS_POINTER", err, err_len)) return rc;

  st = cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, p.k, p.m, p.k);  // W' [K, N], ld K
  if (int rc = fail(st, "cublasLtMatrixLayoutCreate(A)", err, err_len)) return rc;
  st = cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, p.k, p.n, p.k);  // X' [K, M], ld K
  if (int rc = fail(st, "cublasLtMatrixLayoutCreate(B)", err, err_len)) return rc;
  st = cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, p.m, p.n, p.m);  // Y' [N, M], ld N
  if (int rc = fail(st, "cublasLtMatrixLayoutCreate(D)", err, err_len)) return rc;

  cublasLtMatmulPreference_t pref = nullptr;
  st = cublasLtMatmulPreferenceCreate(&pref);
  if (int rc = fail(st, "cublasLtMatmulPreferenceCreate", err, err_len)) return rc;
  size_t ws = kWorkspaceBytes;
  uint32_t al_a = p.align_a, al_b = p.align_b, al_d = p.align_d;
  struct { cublasLtMatmulPreferenceAttributes_t attr; const void* v; size_t n; } prefs[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)},
  };
  for (auto& pr : prefs) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, pr.attr, pr.v, pr.n);
    if (st != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatmulPreferenceDestroy(pref);
      return fail(st, "cublasLtMatmulPreferenceSetAttribute", err, err_len);
    }
  }
  cublasLtMatmulHeuristicResult_t heur = {};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.d, p.d, pref, 1, &heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (int rc = fail(st, "cublasLtMatmulAlgoGetHeuristic", err, err_len)) return rc;
  if (found == 0) {
    if (err && err_len > 0)
      snprintf(err, err_len,
               "cublasLtMatmulAlgoGetHeuristic found no fp32 algorithm with the RELU_BIAS epilogue "
               "for m=%d n=%d k=%d (alignments %d/%d/%d/%d)",
               p.m, p.n, p.k, p.align_a, p.align_b, p.align_d, p.align_bias);
    return (int)CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p.algo = heur.algo;
  return 0;
}

void destroy_plan(Plan& p) {
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
}

}  // namespace

extern "C" size_t linear_bias_relu_workspace_bytes() { return kWorkspaceBytes; }

// x [M, K], w [N, K], bias [N], y [M, N]; all fp32, contiguous, on the current
// device. workspace: at least linear_bias_relu_workspace_bytes() bytes on the
// device. Returns 0 on success; otherwise a non-zero code and a message in err.
extern "C" int linear_bias_relu_launch(const float* x, const float* w, const float* bias, float* y,
                                       void* workspace, size_t workspace_bytes, int M, int N, int K,
                                       cudaStream_t stream, char* err, int err_len) {
  if (err && err_len > 0) err[0] = '\0';
  if (M == 0 || N == 0) return 0;
  if (workspace_bytes < kWorkspaceBytes) {
    if (err && err_len > 0) snprintf(err, err_len, "workspace too small: %zu bytes", workspace_bytes);
    return -1;
  }
  int device = 0;
  cudaError_t ce = cudaGetDevice(&device);
  if (ce != cudaSuccess || device < 0 || device >= kMaxDevices) {
    if (err && err_len > 0) snprintf(err, err_len, "cudaGetDevice failed: %s", cudaGetErrorString(ce));
    return -1;
  }

  std::lock_guard<std::mutex> lock(g_mutex);
  cublasLtHandle_t& h = g_handles[device];
  if (h == nullptr) {
    cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
      h = nullptr;
      return fail(st, "cublasLtCreate", err, err_len);
    }
  }
  const int al_a = pointer_alignment(w), al_b = pointer_alignment(x), al_d = pointer_alignment(y),
            al_bias = pointer_alignment(bias);
  Plan* plan = nullptr;
  for (auto& p : g_plans) {
    if (p.device == device && p.m == N && p.n == M && p.k == K && p.align_a == al_a &&
        p.align_b == al_b && p.align_d == al_d && p.align_bias == al_bias) {
      plan = &p;
      break;
    }
  }
  if (plan == nullptr) {
    Plan p;
    p.device = device; p.m = N; p.n = M; p.k = K;
    p.align_a = al_a; p.align_b = al_b; p.align_d = al_d; p.align_bias = al_bias;
    if (int rc = build_plan(h, p, bias, err, err_len)) {
      destroy_plan(p);
      return rc;
    }
    g_plans.push_back(p);
    plan = &g_plans.back();
  }

  cublasStatus_t st = cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias, sizeof(bias));
  if (int rc = fail(st, "set BIAS_POINTER", err, err_len)) return rc;
  const float alpha = 1.0f, beta = 0.0f;
  st = cublasLtMatmul(h, plan->desc, &alpha, w, plan->a, x, plan->b, &beta, y, plan->d, y, plan->d,
                      &plan->algo, workspace, kWorkspaceBytes, stream);
  return fail(st, "cublasLtMatmul", err, err_len);
}
