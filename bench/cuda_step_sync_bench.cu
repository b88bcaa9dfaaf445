// What a dependency between two phases of a decode step costs on the device, measured three ways over the
// same work: chained kernels in a captured graph (programmatic dependent launch, as the decode kernels are
// launched), the same kernels launched plainly, one persistent kernel whose phases meet at a grid-wide
// barrier, and persistent kernels of five phases (a decoder layer's: qkv, attention, o, gate/up, down)
// chained.
//   cuda_step_sync_bench [PHASES]   (140 by default: about a Qwen3-0.6B decode step's kernels)
// Each phase is a GEMV's skeleton: every block streams its slice of the phase's weights (loaded before it
// waits for the phase before, as the GEMV does), reads the whole vector the phase before wrote, reduces, and
// writes one element of the next vector. The weights of all phases together are far larger than L2, so each
// phase reads its bytes from DRAM. Prints microseconds a phase for each form; the difference is what a
// persistent decode kernel could save a dependency.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kThreads = 256;
// 16-byte weight pieces a thread loads a phase: 64 bytes in flight a thread.
constexpr int kPiecesPerThread = 4;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

struct Phases {
  const uint4* weights;  // phases x blocks x kThreads x kPiecesPerThread pieces
  float* vectors;        // two vectors of `blocks` floats, phase p reads p % 2 and writes (p + 1) % 2
  unsigned* arrivals;    // a counter a phase: the grid barrier after it (persistent forms)
  int blocks;
  int phases;
};

__device__ void load_weights(const Phases& p, int phase, uint4 (&pieces)[kPiecesPerThread]) {
  const uint4* slice =
      p.weights + ((static_cast<size_t>(phase) * p.blocks + blockIdx.x) * kThreads) * kPiecesPerThread;
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i) pieces[i] = __ldg(slice + i * kThreads + threadIdx.x);
}

// The phase's work once its input is ready: the weights against the vector, reduced over the block.
__device__ void finish_phase(const Phases& p, int phase, const uint4 (&pieces)[kPiecesPerThread]) {
  const float* in = p.vectors + (phase % 2) * p.blocks;
  float* out = p.vectors + ((phase + 1) % 2) * p.blocks;
  float sum = 0;
  for (int i = threadIdx.x; i < p.blocks; i += kThreads) sum += __ldcg(in + i);  // L2: other blocks wrote it
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i)
    sum += __uint_as_float(pieces[i].x & 0x3f7fffffu) * 1e-30f +
           __uint_as_float(pieces[i].w & 0x3f7fffffu) * 1e-30f;
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
    out[blockIdx.x] = total / p.blocks;
  }
}

__device__ unsigned load_acquire(const unsigned* address) {
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

// Every block arrives at phase k's counter once; the barrier is passed when it holds every block. The release
// on arrival and the acquire on the spin order the phase's writes before the next phase's reads.
__device__ void grid_barrier(const Phases& p, int phase) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p.arrivals + phase) : "memory");
    while (load_acquire(p.arrivals + phase) < static_cast<unsigned>(p.blocks)) {
    }
  }
  __syncthreads();
}

// Phases [first, last), meeting at grid barriers: each one's weights load while the barrier before it is
// awaited (the first phase's while the kernel before waits, where the launch is chained).
__global__ void __launch_bounds__(kThreads) phases_kernel(Phases p, int first, int last, int chained) {
  uint4 pieces[kPiecesPerThread];
  load_weights(p, first, pieces);
#if __CUDA_ARCH__ >= 900
  if (chained) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
#endif
  for (int phase = first; phase < last; ++phase) {
    if (phase > first) grid_barrier(p, phase - 1);
    finish_phase(p, phase, pieces);
    if (phase + 1 < last) load_weights(p, phase + 1, pieces);
  }
}

// How a form's kernels are launched: plainly, chained by programmatic dependent launch (the device keeps a
// chained grid that fits co-resident as it would any), or as one cooperative kernel.
enum class Launch { plain, chained, cooperative };

struct Form {
  const char* name;
  int phases_per_kernel;  // 0: every phase in one kernel
  Launch launch;
};

void record(cudaStream_t stream, const Phases& p, const Form& form) {
  const int step = form.phases_per_kernel == 0 ? p.phases : form.phases_per_kernel;
  if (step > 1) check(cudaMemsetAsync(p.arrivals, 0, p.phases * sizeof(unsigned), stream), "memset");
  cudaLaunchAttribute attribute{};
  if (form.launch == Launch::cooperative) {
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
  } else {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(p.blocks);
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = form.launch == Launch::plain ? 0 : 1;
  const int chained = form.launch == Launch::chained ? 1 : 0;
  for (int first = 0; first < p.phases; first += step) {
    const int last = first + step < p.phases ? first + step : p.phases;
    check(cudaLaunchKernelEx(&config, phases_kernel, p, first, last, chained), "launch");
  }
}

// Microseconds a phase of the form's graph, after a warm-up.
double phase_us(cudaStream_t stream, const Phases& p, const Form& form) {
  cudaGraph_t graph;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
  record(stream, p, form);
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  constexpr int kRepeats = 50;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) check(cudaGraphLaunch(exec, stream), "warm-up");
  check(cudaEventRecord(start, stream), "record");
  for (int i = 0; i < kRepeats; ++i) check(cudaGraphLaunch(exec, stream), "launch");
  check(cudaEventRecord(stop, stream), "record");
  check(cudaEventSynchronize(stop), "synchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return 1e3 * ms / kRepeats / p.phases;
}

}  // namespace

int main(int argc, char** argv) {
  const int phases = argc > 1 ? std::atoi(argv[1]) : 140;
  const Form forms[] = {{"chained kernels", 1, Launch::chained},
                        {"plain kernels", 1, Launch::plain},
                        {"one persistent kernel", 0, Launch::cooperative},
                        {"5-phase kernels chained", 5, Launch::chained}};
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  int resident = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, phases_kernel, kThreads, 0), "occupancy");
  std::printf("%s: %d multiprocessors, %d blocks of %d threads resident on each, %d phases; us a phase\n",
              prop.name, prop.multiProcessorCount, resident, kThreads, phases);
  std::printf("blocks  weights/phase");
  for (const Form& form : forms) std::printf("  %s", form.name);
  std::printf("\n");
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  for (int per_sm : {1, 2, 4}) {
    if (per_sm > resident) break;
    Phases p{};
    p.blocks = per_sm * prop.multiProcessorCount;
    p.phases = phases;
    const size_t pieces = static_cast<size_t>(phases) * p.blocks * kThreads * kPiecesPerThread;
    uint4* weights = nullptr;
    check(cudaMalloc(&weights, pieces * sizeof(uint4)), "weights");
    check(cudaMemset(weights, 0x11, pieces * sizeof(uint4)), "weights");
    p.weights = weights;
    check(cudaMalloc(&p.vectors, 2 * p.blocks * sizeof(float)), "vectors");
    check(cudaMemset(p.vectors, 0, 2 * p.blocks * sizeof(float)), "vectors");
    check(cudaMalloc(&p.arrivals, phases * sizeof(unsigned)), "arrivals");
    const double phase_kb = static_cast<double>(p.blocks) * kThreads * kPiecesPerThread * 16 / 1024;
    std::printf("%6d  %10.0f KB", p.blocks, phase_kb);
    for (const Form& form : forms)
      std::printf("  %*.2f", static_cast<int>(std::strlen(form.name)), phase_us(stream, p, form));
    std::printf("\n");
    cudaFree(weights);
    cudaFree(p.vectors);
    cudaFree(p.arrivals);
  }
  return 0;
}
