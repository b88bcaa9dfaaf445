// What an xpu device spends on each kernel and between kernels, from OpenCL's own timestamps: with
// TFM_XPU_TIMELINE=1 the queues profile their commands, every kernel enqueued outside a graph carries an
// event, and at exit a table goes to stderr: per kernel name its launches and device time, and the idle time
// between a kernel's end and the next one's start on the same queue (gaps over 1 ms, host waits, are counted
// apart). Unlike TFM_PROFILE_OPS it adds no waits, so it shows how launches overlap as they do in a real run.
// Off, it costs a branch a launch. An event is read once it has completed, when a later launch is recorded,
// so the table at exit makes no OpenCL call (drivers may be gone by then) and leaves out the launches still
// running then.
#pragma once

#include <CL/cl.h>

namespace tfm::xpu {

bool kernel_timeline_enabled();

// Records the launch of kernel `name` that `done` (an event of a profiling queue) completes; takes the event.
void kernel_timeline_add(const char* name, cl_event done);

}  // namespace tfm::xpu
