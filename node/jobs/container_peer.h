// What gandivad learns from the kernel about a local caller that runs in a
// container (its own mount and pid namespaces, docs/containers.md).
//
// The local socket's peer credentials (SO_PEERCRED, protocol::Caller) carry the
// caller's pid as the kernel translated it into gandivad's pid namespace: that is
// the only pid of a container's process gandivad takes. A pid the caller names in
// a request (job_started: the job it forked) is a pid of the caller's namespace;
// it is looked up among the processes of that namespace, never taken as a pid of
// gandivad's. A caller that does not see gandivad's /dev/shm (a container's is
// its own) gets its job's control block in the blocks directory instead
// (Node::Register).
#ifndef GANDIVA_NODE_JOBS_CONTAINER_PEER_H_
#define GANDIVA_NODE_JOBS_CONTAINER_PEER_H_

#include <cstdint>

#include "gandiva/status.h"

namespace gandiva::controller {

// Whether process `pid` (of gandivad's pid namespace) runs in a container as
// far as gandivad is concerned: in another mount namespace whose /dev/shm is
// not gandivad's. One in another mount namespace that shares gandivad's
// /dev/shm (`ip netns exec`, a service's PrivateTmp) is not. False for pid <= 0
// (a caller made in-process).
StatusOr<bool> InContainer(int64_t pid);

// The pid, in gandivad's namespace, of the process that process `caller_pid`
// (gandivad's namespace) calls `pid` in its own pid namespace. The same pid
// when the caller shares gandivad's pid namespace or is not known (<= 0);
// NotFound when no process of the caller's namespace has that pid.
StatusOr<int> HostPidOf(int64_t caller_pid, int64_t pid);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_CONTAINER_PEER_H_
