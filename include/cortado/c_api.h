/* Cortado's C interface: nets and solvers behind opaque handles, for the
 * Python module (python/cortado, through ctypes) and any other language
 * with a C foreign-function interface. Built as libcortado_c.so.
 *
 * Every function that can fail returns 0 (or a handle) on success and -1 (or
 * NULL) on failure; cortado_last_error() then gives the message, the same
 * one the trainer prints (file and line, layer, field). Blob values cross
 * the interface as float32 whatever the blob's storage type (values set are
 * kept as given; a 16-bit layer rounds them to nearest when it reads them,
 * as it does any float input); a blob is named either by its name in
 * the net (layer < 0) or as parameter `param` of layer number `layer`.
 * Handles are not thread-safe; use one per thread. */
#ifndef CORTADO_C_API_H_
#define CORTADO_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cortado_net cortado_net;
typedef struct cortado_solver cortado_solver;

/* The message of the last failure on this thread ("" if none). */
const char* cortado_last_error(void);
const char* cortado_version(void);
/* Seeds this thread's random generator (fillers, dropout, data order): the
 * generator is per thread, as each solver of a multi-GPU run has its own. */
void cortado_set_random_seed(uint64_t seed);
/* How many CUDA devices this build and machine have (0 without). */
int cortado_device_count(void);

/* A net from a prototxt; phase 0 TRAIN, 1 TEST; weights: a .caffemodel or
 * .caffemodel.h5 to load, or NULL; gpu: a device number, or -1 for the CPU. */
cortado_net* cortado_net_open(const char* model, int phase, const char* weights, int gpu);
/* The same with a precision applied to the net as trainer --precision
 * applies it: "fp32", "fp16" or "bf16"; NULL or "": the file's own types. */
cortado_net* cortado_net_open_precision(const char* model, int phase, const char* weights, int gpu,
                                        const char* precision);
void cortado_net_close(cortado_net* net);
int cortado_net_forward(cortado_net* net, double* loss);
/* Fails unless a forward ran since the net was built or reshaped. */
int cortado_net_backward(cortado_net* net);
int cortado_net_reshape(cortado_net* net);
int cortado_net_copy_weights(cortado_net* net, const char* path);
/* Writes the weights: .h5 names HDF5 (Caffe's layout), anything else a
 * binary .caffemodel; written to a temporary name and renamed. */
int cortado_net_save(cortado_net* net, const char* path);

int cortado_net_num_blobs(cortado_net* net);
const char* cortado_net_blob_name(cortado_net* net, int i);
int cortado_net_num_layers(cortado_net* net);
const char* cortado_net_layer_name(cortado_net* net, int i);
const char* cortado_net_layer_type(cortado_net* net, int i);
int cortado_net_layer_num_params(cortado_net* net, int i);
int cortado_net_num_inputs(cortado_net* net);
const char* cortado_net_input_name(cortado_net* net, int i);
int cortado_net_num_outputs(cortado_net* net);
const char* cortado_net_output_name(cortado_net* net, int i);

/* The blob's number of axes (-1 on failure); its dimensions, at most
 * max_dims of them, into dims. */
int cortado_blob_shape(cortado_net* net, const char* blob, int layer, int param, int* dims, int max_dims);
/* Copies `count` (the blob's count) values of the data (diff = 0) or the
 * diff (diff = 1) out of or into the blob. */
int cortado_blob_get(cortado_net* net, const char* blob, int layer, int param, int diff, float* out, int64_t count);
int cortado_blob_set(cortado_net* net, const char* blob, int layer, int param, int diff, const float* in,
                     int64_t count);
/* Reshapes a named blob (an input); every layer reshapes to its bottoms at
 * the next forward (or cortado_net_reshape). */
int cortado_blob_reshape(cortado_net* net, const char* blob, const int* dims, int ndim);

/* A solver from a solver prototxt; gpu as for nets. */
cortado_solver* cortado_solver_open(const char* solver, int gpu);
/* The same with a precision applied as trainer --precision applies it
 * (cortado/precision.hpp): "fp32", "fp16" or "bf16"; NULL or "": the files'
 * own types. */
cortado_solver* cortado_solver_open_precision(const char* solver, int gpu, const char* precision);
void cortado_solver_close(cortado_solver* solver);
int cortado_solver_step(cortado_solver* solver, int iters);
/* Trains to max_iter, resuming from a .solverstate first unless NULL. */
int cortado_solver_solve(cortado_solver* solver, const char* resume);
int cortado_solver_restore(cortado_solver* solver, const char* state);
int cortado_solver_snapshot(cortado_solver* solver);
int cortado_solver_iter(cortado_solver* solver);
/* The solver's nets, owned by the solver (valid until it is closed). */
cortado_net* cortado_solver_net(cortado_solver* solver);
int cortado_solver_num_test_nets(cortado_solver* solver);
cortado_net* cortado_solver_test_net(cortado_solver* solver, int i);

/* Views for a caller that wraps blob memory without a copy (numpy).
 *
 * cortado_blob_host_view gives the address of the blob's float32 host array
 * (data: diff = 0, gradients: diff = 1) and its number of values. For a blob
 * held in FP32 it is the blob's own memory; for a blob held in FP16 or BF16
 * (or DOUBLE) it is the blob's float32 companion buffer, the one that holds
 * FP32 master weights, filled by converting.
 * - writable != 0: the host array becomes the newest copy of the values (on
 *   a GPU net the next pass uploads it; a 16-bit layer converts it when it
 *   reads it), so that what the caller writes there reaches the next pass.
 * - writable == 0: the newest values are brought to the host array
 *   (downloaded, or converted from FP16/BF16); which copy is the newest
 *   does not change.
 * The address stays the same while the net lives, until the blob is
 * reshaped to more values than it ever held. A caller that keeps an array
 * across passes calls this again with writable = 1 before a pass (its
 * writes reach the pass) and with writable = 0 after it (it sees the
 * results); the Python module does so for every array it handed out. */
int cortado_blob_host_view(cortado_net* net, const char* blob, int layer, int param, int diff, int writable,
                           float** data, int64_t* count);

/* Forward through layers start..end (indices, both included; as Caffe's
 * ForwardFromTo); *loss: the weighted loss of those layers. */
int cortado_net_forward_range(cortado_net* net, int start, int end, double* loss);
/* Backward through layers start down to end (both included; as Caffe's
 * BackwardFromTo); needs a forward first. */
int cortado_net_backward_range(cortado_net* net, int start, int end);
/* The names of layer i's bottom (input) and top (output) blobs. */
int cortado_net_layer_num_bottoms(cortado_net* net, int i);
const char* cortado_net_layer_bottom_name(cortado_net* net, int i, int j);
int cortado_net_layer_num_tops(cortado_net* net, int i);
const char* cortado_net_layer_top_name(cortado_net* net, int i, int j);
/* cortado_net_open_precision with the net state's level and stages (the
 * include/exclude rules' stage, not_stage, min_level, max_level), as
 * trainer --level and --stage. */
cortado_net* cortado_net_open_state(const char* model, int phase, const char* weights, int gpu,
                                    const char* precision, int level, const char* const* stages, int num_stages);

/* The switches (cortado/switches.hpp), named as the trainer's flags:
 * names[i] set to values[i] ("share_diffs" "0", "cudnn_api" "graph") over
 * the files' fields, as the trainer's --share_diffs=0 --cudnn_api=graph;
 * the process's switches (cpu_share, cpu_bf16_dot) take effect for the
 * whole process. A bad name or value fails, naming it. num_switches 0: none. */
cortado_net* cortado_net_open_switches(const char* model, int phase, const char* weights, int gpu,
                                       const char* precision, int level, const char* const* stages, int num_stages,
                                       const char* const* names, const char* const* values, int num_switches);
/* The same for a solver: its net switches reach every net it builds. */
cortado_solver* cortado_solver_open_switches(const char* solver, int gpu, const char* precision,
                                             const char* const* names, const char* const* values, int num_switches);
/* One switch of the process (cpu_share, cpu_bf16_dot), from now on; a net's
 * or a solver's switch is an error saying where it goes. */
int cortado_set_switch(const char* name, const char* value);

#ifdef __cplusplus
}
#endif

#endif /* CORTADO_C_API_H_ */
