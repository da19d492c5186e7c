/* A CUDA runtime that runs nothing on a device: torch's host code only.
 *
 * tools/gen_cuda_ops.py builds this file once per library it replaces (-DPART_CUDART,
 * -DPART_NVRTC, -DPART_CUDNN, -DPART_CUFFT, each under the soname and symbol version torch
 * links, and -DPART_DRIVER as libcuda.so.1, which torch opens by name) and preloads them
 * (LD_PRELOAD) into a CUDA build of torch on a machine without a GPU. The dynamic linker
 * matches a library by its soname, so these are the libraries torch then runs with: one
 * device of compute capability 9.0; "device" memory is host memory (cudaMalloc is calloc,
 * cudaMemcpy is memcpy); kernels launch and do nothing; cuDNN handles and descriptors are
 * made but cuDNN computes nothing; cuFFT plans run as no-ops; run-time compilation (NVRTC)
 * fails. torch then runs its own host code for every aten operator on a "cuda" tensor: the
 * dispatcher, device checks, shape checks and the AT_DISPATCH dtype switch that raises
 * '"<kernel>" not implemented for ...' happen before any kernel would run, so the errors
 * torch raises are those a GPU raises, by construction. Values are never computed: a value
 * a kernel would have made reads as zero.
 *
 * Written for this project from the CUDA libraries' documented signatures; the struct
 * layouts come from the installed nvidia-cuda-runtime wheel's driver_types.h.
 */
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <driver_types.h>

#ifndef CUDA_MAJOR
#define CUDA_MAJOR 13
#endif
#define OK 0
#define NOT_SUPPORTED 801 /* cudaErrorNotSupported */
#define EXPORT __attribute__((visibility("default")))

static int current_device __attribute__((unused)) = 0;
static const size_t total_memory __attribute__((unused)) = (size_t)80 << 30;
static const size_t most_one_allocation __attribute__((unused)) = (size_t)16 << 30;

__attribute__((unused)) static void *handle(void) { return calloc(1, 64); }

#ifdef PART_CUDART
EXPORT int cudaGetDeviceCount(int *n) { *n = 1; return OK; }
EXPORT int cudaGetDevice(int *d) { *d = current_device; return OK; }
EXPORT int cudaSetDevice(int d) { if (d != 0) return 101; /* invalid ordinal */ current_device = d; return OK; }
EXPORT int cudaDeviceSynchronize(void) { return OK; }
EXPORT int cudaDriverGetVersion(int *v) { *v = CUDA_MAJOR * 1000; return OK; }
EXPORT int cudaRuntimeGetVersion(int *v) { *v = CUDA_MAJOR * 1000; return OK; }
EXPORT int cudaGetLastError(void) { return OK; }
EXPORT int cudaPeekAtLastError(void) { return OK; }
EXPORT const char *cudaGetErrorString(int e) { (void)e; return "error in the host-only CUDA runtime (no device)"; }
EXPORT const char *cudaGetErrorName(int e) { (void)e; return "cudaErrorHostOnlyRuntime"; }
EXPORT int cudaDeviceCanAccessPeer(int *can, int a, int b) { (void)a; (void)b; *can = 0; return OK; }
EXPORT int cudaDeviceEnablePeerAccess(int d, unsigned f) { (void)d; (void)f; return OK; }
EXPORT int cudaDeviceGetPCIBusId(char *s, int len, int d) { (void)d; strncpy(s, "0000:00:00.0", len); return OK; }
EXPORT int cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return OK;
}

EXPORT int cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
    (void)d;
    memset(p, 0, sizeof(*p));
    strcpy(p->name, "host-only CUDA runtime (sm_90)");
    p->totalGlobalMem = total_memory;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024; p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = 65535; p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = 9; p->minor = 0;
    p->multiProcessorCount = 132;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 << 20;
    p->memoryBusWidth = 5120;
    p->concurrentKernels = 1;
    p->unifiedAddressing = 1;
    p->managedMemory = 1;
    p->asyncEngineCount = 2;
    return OK;
}

EXPORT int cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
    struct cudaDeviceProp p;
    cudaGetDeviceProperties(&p, d);
    switch (a) {
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *v = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMaxGridDimX: *v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *v = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *v = p.maxGridSize[2]; break;
    case cudaDevAttrMaxBlockDimX: *v = 1024; break;
    case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrL2CacheSize: *v = p.l2CacheSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *v = 65536; break;
    default: *v = 0;
    }
    return OK;
}

/* memory: host memory stands for device memory. Each live block remembers whether the host
 * wrote its bytes (a copy from the host, a memset, a copy of such a block); the rest hold what
 * a kernel would have computed, which is never computed here. A device-to-host copy from such
 * a block is counted: whatever torch's host code decides from those bytes (a value check, a
 * size) is not what a GPU decides. */
struct block { char *p; size_t n; int host, written; };
static struct block *blocks;
static size_t nblocks, nslots;
static long uncomputed_reads;

static struct block *find(const void *p) {
    for (size_t i = 0; i < nblocks; i++)
        if ((const char *)p >= blocks[i].p && (const char *)p < blocks[i].p + blocks[i].n) return &blocks[i];
    return NULL;
}
static int track(void *p, size_t n, int host) {
    if (nblocks == nslots) {
        size_t more = nslots ? 2 * nslots : 256;
        struct block *grown = realloc(blocks, more * sizeof(*blocks));
        if (!grown) return 2;
        blocks = grown, nslots = more;
    }
    blocks[nblocks++] = (struct block){(char *)p, n ? n : 1, host, 0};
    return OK;
}
static void untrack(void *p) {
    struct block *b = find(p);
    if (b) *b = blocks[--nblocks];
    free(p);
}
static void copied(void *d, const void *s) {
    struct block *to = find(d), *from = find(s);
    int device_from = from && !from->host;
    if (device_from && !from->written && !(to && !to->host)) uncomputed_reads++;
    if (to && !to->host) to->written = !device_from || from->written;
}
static void written(void *p) { struct block *b = find(p); if (b) b->written = 1; }

/* device-to-host copies of bytes no kernel computed since the last call (tools/gen_cuda_ops.py) */
EXPORT long host_only_uncomputed_reads(void) { long n = uncomputed_reads; uncomputed_reads = 0; return n; }

static int allocate(void **p, size_t n, int host) {
    if (n > most_one_allocation) return 2; /* cudaErrorMemoryAllocation */
    *p = calloc(1, n ? n : 1);
    if (!*p) return 2;
    if (track(*p, n, host) != OK) { free(*p); return 2; }
    return OK;
}
EXPORT int cudaMalloc(void **p, size_t n) { return allocate(p, n, 0); }
EXPORT int cudaMallocAsync(void **p, size_t n, void *s) { (void)s; return cudaMalloc(p, n); }
EXPORT int cudaFree(void *p) { untrack(p); return OK; }
EXPORT int cudaFreeAsync(void *p, void *s) { (void)s; untrack(p); return OK; }
EXPORT int cudaHostAlloc(void **p, size_t n, unsigned f) { (void)f; return allocate(p, n, 1); }
EXPORT int cudaFreeHost(void *p) { untrack(p); return OK; }
EXPORT int cudaHostRegister(void *p, size_t n, unsigned f) { (void)p; (void)n; (void)f; return OK; }
EXPORT int cudaHostUnregister(void *p) { (void)p; return OK; }
EXPORT int cudaMemGetInfo(size_t *free_, size_t *total) { *free_ = total_memory; *total = total_memory; return OK; }
EXPORT int cudaMemcpy(void *d, const void *s, size_t n, int k) {
    (void)k;
    if (n) { copied(d, s); memmove(d, s, n); }
    return OK;
}
EXPORT int cudaMemcpyAsync(void *d, const void *s, size_t n, int k, void *st) { (void)st; return cudaMemcpy(d, s, n, k); }
EXPORT int cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n, void *st) {
    (void)dd; (void)sd; (void)st; return cudaMemcpy(d, s, n, 0);
}
EXPORT int cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, int k, void *st) {
    (void)k; (void)st;
    if (w && h) copied(d, s);
    for (size_t r = 0; r < h; r++) memmove((char *)d + r * dp, (const char *)s + r * sp, w);
    return OK;
}
EXPORT int cudaMemcpyToSymbol(const void *sym, const void *s, size_t n, size_t off, int k) {
    (void)k; memmove((char *)sym + off, s, n); return OK;
}
EXPORT int cudaGetSymbolAddress(void **p, const void *sym) { *p = (void *)sym; return OK; }
EXPORT int cudaMemset(void *p, int v, size_t n) { written(p); memset(p, v, n); return OK; }
EXPORT int cudaMemsetAsync(void *p, int v, size_t n, void *s) { (void)s; return cudaMemset(p, v, n); }
EXPORT int cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof(*a));
    a->type = cudaMemoryTypeDevice;
    a->device = 0;
    a->devicePointer = (void *)p;
    a->hostPointer = (void *)p;
    return OK;
}

/* streams and events: handles with nothing behind them */
EXPORT int cudaStreamCreate(void **s) { *s = handle(); return OK; }
EXPORT int cudaStreamCreateWithFlags(void **s, unsigned f) { (void)f; *s = handle(); return OK; }
EXPORT int cudaStreamCreateWithPriority(void **s, unsigned f, int pr) { (void)f; (void)pr; *s = handle(); return OK; }
EXPORT int cudaStreamDestroy(void *s) { (void)s; return OK; }
EXPORT int cudaStreamSynchronize(void *s) { (void)s; return OK; }
EXPORT int cudaStreamQuery(void *s) { (void)s; return OK; }
EXPORT int cudaStreamWaitEvent(void *s, void *e, unsigned f) { (void)s; (void)e; (void)f; return OK; }
EXPORT int cudaStreamGetPriority(void *s, int *p) { (void)s; *p = 0; return OK; }
EXPORT int cudaStreamIsCapturing(void *s, enum cudaStreamCaptureStatus *st) { (void)s; *st = cudaStreamCaptureStatusNone; return OK; }
EXPORT int cudaStreamGetCaptureInfo(void *s, enum cudaStreamCaptureStatus *st, unsigned long long *id, void **g,
                                    const void **deps, const void **edges, size_t *n) {
    (void)s;
    if (st) *st = cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (g) *g = NULL;
    if (deps) *deps = NULL;
    if (edges) *edges = NULL;
    if (n) *n = 0;
    return OK;
}
EXPORT int cudaThreadExchangeStreamCaptureMode(int *m) { (void)m; return OK; }
EXPORT int cudaStreamAddCallback(void *s, void (*cb)(void *, int, void *), void *data, unsigned f) {
    (void)f; cb(s, OK, data); return OK;
}
EXPORT int cudaLaunchHostFunc(void *s, void (*fn)(void *), void *data) { (void)s; fn(data); return OK; }
EXPORT int cudaEventCreate(void **e) { *e = handle(); return OK; }
EXPORT int cudaEventCreateWithFlags(void **e, unsigned f) { (void)f; *e = handle(); return OK; }
EXPORT int cudaEventDestroy(void *e) { (void)e; return OK; }
EXPORT int cudaEventRecord(void *e, void *s) { (void)e; (void)s; return OK; }
EXPORT int cudaEventRecordWithFlags(void *e, void *s, unsigned f) { (void)e; (void)s; (void)f; return OK; }
EXPORT int cudaEventQuery(void *e) { (void)e; return OK; }
EXPORT int cudaEventSynchronize(void *e) { (void)e; return OK; }
EXPORT int cudaEventElapsedTime(float *ms, void *a, void *b) { (void)a; (void)b; *ms = 0.0f; return OK; }

/* kernels: registered and launched, never run */
EXPORT void **__cudaRegisterFatBinary(void *fatbin) { (void)fatbin; return (void **)handle(); }
EXPORT void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
EXPORT void __cudaUnregisterFatBinary(void **h) { (void)h; }
EXPORT void __cudaRegisterFunction(void **h, const char *f, char *df, const char *dn, int t,
                                   void *a, void *b, void *c, void *d, int *w) {
    (void)h; (void)f; (void)df; (void)dn; (void)t; (void)a; (void)b; (void)c; (void)d; (void)w;
}
EXPORT void __cudaRegisterVar(void **h, char *hv, char *dv, const char *dn, int ext, size_t size,
                              int constant, int global) {
    (void)h; (void)hv; (void)dv; (void)dn; (void)ext; (void)size; (void)constant; (void)global;
}
EXPORT char __cudaInitModule(void **h) { (void)h; return 1; }
EXPORT unsigned __cudaPushCallConfiguration(void) { return OK; }
EXPORT int __cudaPopCallConfiguration(uint32_t *grid, uint32_t *block, size_t *shmem, void **stream) {
    if (grid) { grid[0] = grid[1] = grid[2] = 1; }
    if (block) { block[0] = block[1] = block[2] = 1; }
    if (shmem) *shmem = 0;
    if (stream) *stream = NULL;
    return OK;
}
EXPORT int __cudaLaunchKernel(void) { return OK; }
EXPORT int __cudaGetKernel(void **k, const void *f) { *k = (void *)f; return OK; }
EXPORT int cudaLaunchKernel(void) { return OK; }
EXPORT int cudaLaunchKernelExC(void) { return OK; }
EXPORT int cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *f) {
    (void)f;
    memset(a, 0, sizeof(*a));
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = 90;
    a->binaryVersion = 90;
    return OK;
}
EXPORT int cudaFuncSetAttribute(const void *f, int a, int v) { (void)f; (void)a; (void)v; return OK; }
EXPORT int cudaKernelSetAttributeForDevice(void *k, int a, int v, int d) { (void)k; (void)a; (void)v; (void)d; return OK; }
EXPORT int cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *f, int b, size_t s) {
    (void)f; (void)b; (void)s; *n = 1; return OK;
}
EXPORT int cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *f, int b, size_t s, unsigned fl) {
    (void)f; (void)b; (void)s; (void)fl; *n = 1; return OK;
}
EXPORT int cudaLibraryLoadData(void **lib) { *lib = handle(); return OK; }
EXPORT int cudaLibraryGetKernel(void **k, void *lib, const char *name) { (void)lib; (void)name; *k = handle(); return OK; }
EXPORT int cudaLibraryUnload(void *lib) { (void)lib; return OK; }
EXPORT int cudaProfilerStart(void) { return OK; }
EXPORT int cudaProfilerStop(void) { return OK; }

/* what has no meaning without a device */
EXPORT int cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned v, unsigned long long f, int *status) {
    (void)sym; (void)v; (void)f;
    if (fn) *fn = NULL;
    if (status) *status = 1; /* cudaDriverEntryPointSymbolNotFound */
    return 500; /* cudaErrorSymbolNotFound */
}
#define UNSUPPORTED(name) EXPORT int name(void) { return NOT_SUPPORTED; }
UNSUPPORTED(cudaGraphAddNode)
UNSUPPORTED(cudaGraphConditionalHandleCreate)
UNSUPPORTED(cudaGraphDestroy)
UNSUPPORTED(cudaGraphExecDestroy)
UNSUPPORTED(cudaGraphGetNodes)
UNSUPPORTED(cudaGraphInstantiateWithFlags)
UNSUPPORTED(cudaGraphLaunch)
UNSUPPORTED(cudaGraphRetainUserObject)
UNSUPPORTED(cudaGraphNodeGetDependencies)
UNSUPPORTED(cudaStreamBeginCapture)
UNSUPPORTED(cudaStreamBeginCaptureToGraph)
UNSUPPORTED(cudaStreamEndCapture)
UNSUPPORTED(cudaStreamUpdateCaptureDependencies)
UNSUPPORTED(cudaUserObjectCreate)
UNSUPPORTED(cudaUserObjectRelease)
UNSUPPORTED(cudaIpcCloseMemHandle)
UNSUPPORTED(cudaIpcGetEventHandle)
UNSUPPORTED(cudaIpcGetMemHandle)
UNSUPPORTED(cudaIpcOpenEventHandle)
UNSUPPORTED(cudaIpcOpenMemHandle)
UNSUPPORTED(cudaDeviceGetDefaultMemPool)
UNSUPPORTED(cudaDeviceGetGraphMemAttribute)
UNSUPPORTED(cudaDeviceSetGraphMemAttribute)
UNSUPPORTED(cudaMemPoolGetAttribute)
UNSUPPORTED(cudaMemPoolSetAccess)
UNSUPPORTED(cudaMemPoolSetAttribute)
UNSUPPORTED(cudaMemPoolTrimTo)
UNSUPPORTED(cudaLaunchCooperativeKernel)
#endif

#ifdef PART_NVRTC
/* NVRTC (jiterator kernels are compiled at run time): compilation fails with a plain
 * message, which torch raises after its own checks have passed */
EXPORT int nvrtcVersion(int *major, int *minor) { *major = CUDA_MAJOR; *minor = 0; return OK; }
EXPORT int nvrtcCreateProgram(void **prog) { *prog = handle(); return OK; }
EXPORT int nvrtcDestroyProgram(void **prog) { (void)prog; return OK; }
EXPORT int nvrtcAddNameExpression(void *prog, const char *n) { (void)prog; (void)n; return OK; }
EXPORT int nvrtcCompileProgram(void) { return 6; /* NVRTC_ERROR_COMPILATION */ }
EXPORT const char *nvrtcGetErrorString(int e) { (void)e; return "NVRTC_ERROR_COMPILATION (host-only CUDA runtime: no compiler)"; }
static const char no_compiler[] = "host-only CUDA runtime: no compiler";
EXPORT int nvrtcGetProgramLogSize(void *prog, size_t *n) { (void)prog; *n = sizeof(no_compiler); return OK; }
EXPORT int nvrtcGetProgramLog(void *prog, char *log) { (void)prog; strcpy(log, no_compiler); return OK; }
#define NVRTC_FAILS(name) EXPORT int name(void) { return 6; }
NVRTC_FAILS(nvrtcGetCUBIN)
NVRTC_FAILS(nvrtcGetCUBINSize)
NVRTC_FAILS(nvrtcGetLoweredName)
NVRTC_FAILS(nvrtcGetPTX)
NVRTC_FAILS(nvrtcGetPTXSize)
#endif

#ifdef PART_DRIVER
/* the driver API, which torch opens by name (dlopen) for contexts and run-time kernels */
#define NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */
EXPORT int cuInit(unsigned f) { (void)f; return OK; }
EXPORT int cuGetErrorString(int e, const char **s) { (void)e; *s = "no device (host-only CUDA runtime)"; return OK; }
EXPORT int cuGetErrorName(int e, const char **s) { (void)e; *s = "CUDA_ERROR_NO_DEVICE"; return OK; }
EXPORT int cuDriverGetVersion(int *v) { *v = CUDA_MAJOR * 1000; return OK; }
EXPORT int cuDevicePrimaryCtxGetState(int d, unsigned *flags, int *active) { (void)d; *flags = 0; *active = 1; return OK; }
EXPORT int cuDeviceGet(int *d, int o) { *d = o; return OK; }
EXPORT int cuDeviceGetCount(int *n) { *n = 1; return OK; }
EXPORT int cuCtxGetCurrent(void **c) { static char ctx; *c = &ctx; return OK; }
EXPORT int cuCtxSetCurrent(void *c) { (void)c; return OK; }
EXPORT int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; return cuCtxGetCurrent(c); }
#define NONE(n) EXPORT int n(void) { return NO_DEVICE; }
NONE(cuCtxFromGreenCtx) NONE(cuCtxPopCurrent) NONE(cuCtxPushCurrent) NONE(cuDevResourceGenerateDesc)
NONE(cuDevSmResourceSplitByCount) NONE(cuDeviceGetAttribute) NONE(cuDeviceGetDevResource)
NONE(cuDeviceGetUuid) NONE(cuFuncGetAttribute) NONE(cuFuncSetAttribute) NONE(cuFuncSetCacheConfig)
NONE(cuGreenCtxCreate) NONE(cuGreenCtxDestroy) NONE(cuGreenCtxStreamCreate)
NONE(cuLaunchCooperativeKernel) NONE(cuLaunchKernel) NONE(cuLinkAddData_v2) NONE(cuLinkComplete)
NONE(cuLinkCreate_v2) NONE(cuLogsRegisterCallback) NONE(cuLogsUnregisterCallback)
NONE(cuMemAddressFree) NONE(cuMemAddressReserve) NONE(cuMemCreate)
NONE(cuMemExportToShareableHandle) NONE(cuMemGetAddressRange) NONE(cuMemGetAddressRange_v2)
NONE(cuMemGetAllocationGranularity) NONE(cuMemGetAllocationPropertiesFromHandle)
NONE(cuMemImportFromShareableHandle) NONE(cuMemMap) NONE(cuMemRelease)
NONE(cuMemRetainAllocationHandle) NONE(cuMemSetAccess) NONE(cuMemUnmap) NONE(cuMemsetD32Async)
NONE(cuModuleGetFunction) NONE(cuModuleLoad) NONE(cuModuleLoadData) NONE(cuModuleLoadDataEx)
NONE(cuModuleUnload) NONE(cuMulticastAddDevice) NONE(cuMulticastBindMem) NONE(cuMulticastCreate)
NONE(cuMulticastUnbind) NONE(cuOccupancyMaxActiveBlocksPerMultiprocessor)
NONE(cuPointerGetAttribute) NONE(cuStreamWriteValue32) NONE(cuTensorMapEncodeTiled)
#endif

#ifdef PART_CUDNN
/* cuDNN: handles and descriptors are made and set, so that torch's own checks before
 * cuDNN's work (its dtype and layout checks) run; cuDNN's work itself fails plainly.
 * The other functions torch imports are stubs the generator adds (stubs.h). */
#define CUDNN_FAILS 3000 /* CUDNN_STATUS_NOT_SUPPORTED */
static const char no_cudnn[] = "host-only CUDA runtime: cuDNN does no work here";
EXPORT size_t cudnnGetVersion(void) { return CUDNN_VERSION_NUM; }
EXPORT size_t cudnnGetCudartVersion(void) { return CUDA_MAJOR * 1000; }
EXPORT const char *cudnnGetErrorString(int s) { (void)s; return no_cudnn; }
EXPORT void cudnnGetLastErrorString(char *m, size_t n) { if (n) { strncpy(m, no_cudnn, n - 1); m[n - 1] = 0; } }
EXPORT int cudnnCreate(void **h) { *h = handle(); return OK; }
EXPORT int cudnnSetStream(void *h, void *s) { (void)h; (void)s; return OK; }
EXPORT int cudnnGetStream(void *h, void **s) { (void)h; *s = NULL; return OK; }
EXPORT int cudnnBackendCreateDescriptor(int type, void **d) { (void)type; *d = handle(); return OK; }
#endif

#ifdef PART_CUFFT
/* cuFFT: plans are made (with no work area) and executed as no-ops */
EXPORT int cufftCreate(int *plan) { static int next = 1; *plan = next++; return OK; }
EXPORT int cufftDestroy(int plan) { (void)plan; return OK; }
EXPORT int cufftSetAutoAllocation(int plan, int a) { (void)plan; (void)a; return OK; }
EXPORT int cufftSetStream(int plan, void *s) { (void)plan; (void)s; return OK; }
EXPORT int cufftSetWorkArea(int plan, void *w) { (void)plan; (void)w; return OK; }
EXPORT int cufftXtExec(int plan, void *in, void *out, int dir) { (void)plan; (void)in; (void)out; (void)dir; return OK; }
EXPORT int cufftXtMakePlanMany(int plan, int rank, long long *n, long long *inembed, long long istride,
                               long long idist, int itype, long long *onembed, long long ostride,
                               long long odist, int otype, long long batch, size_t *work, int etype) {
    (void)plan; (void)rank; (void)n; (void)inembed; (void)istride; (void)idist; (void)itype;
    (void)onembed; (void)ostride; (void)odist; (void)otype; (void)batch; (void)etype;
    *work = 0;
    return OK;
}
#endif

/* the functions torch imports that nothing above defines: tools/gen_cuda_ops.py writes
 * them (stubs.h) from the imports of torch's libraries, by name: Create* make a handle,
 * Set* and Destroy* succeed, the rest fail with the library's "not supported" */
#ifdef STUBS
#include "stubs.h"
#endif
