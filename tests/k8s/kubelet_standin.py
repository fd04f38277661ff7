"""A stand-in for kubelet's side of the device-plugin API (v1beta1), for tests:
it serves Registration on its kubelet.sock in a device-plugins directory of
its own, records each Register, and calls a registered plugin's DevicePlugin
methods over the plugin's socket, as kubelet's device manager does. It is not
kubelet: no pods, no checkpoint of allocations, no container runtime; the
tests start the job that Allocate's answer describes themselves.

The messages come from k8s/device_plugin/deviceplugin.proto, compiled here
with protoc; the calls go through grpcio's generic (stub-less) API."""

import os
import queue
import subprocess
import sys
import tempfile
from concurrent import futures

import grpc

_PB2 = None


def messages(proto):
    """The proto's Python module (deviceplugin_pb2), compiled once per process."""
    global _PB2
    if _PB2 is None:
        out = tempfile.mkdtemp(prefix="gd_dp_pb2_")
        subprocess.run(["protoc", "-I", os.path.dirname(os.path.abspath(proto)),
                        f"--python_out={out}", os.path.basename(proto)], check=True)
        sys.path.insert(0, out)
        import deviceplugin_pb2
        _PB2 = deviceplugin_pb2
    return _PB2


class KubeletStandIn:
    SOCKET = "kubelet.sock"

    def __init__(self, plugin_dir, proto):
        self.dir = str(plugin_dir)
        self.pb = messages(proto)
        self.registrations = queue.Queue()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        register = grpc.unary_unary_rpc_method_handler(
            self._register, request_deserializer=self.pb.RegisterRequest.FromString,
            response_serializer=self.pb.Empty.SerializeToString)
        self.server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("v1beta1.Registration", {"Register": register})])
        self.server.add_insecure_port(f"unix://{self.dir}/{self.SOCKET}")
        self.server.start()
        self.channel = None

    def _register(self, request, context):
        self.registrations.put(request)
        return self.pb.Empty()

    def next_registration(self, timeout):
        return self.registrations.get(timeout=timeout)

    def connect(self, endpoint):
        """Connects to the plugin's socket, named by its RegisterRequest."""
        self.channel = grpc.insecure_channel(f"unix://{self.dir}/{endpoint}")
        grpc.channel_ready_future(self.channel).result(timeout=10)

    def _unary(self, method, request, reply_type, timeout=10):
        call = self.channel.unary_unary(f"/v1beta1.DevicePlugin/{method}",
                                        request_serializer=type(request).SerializeToString,
                                        response_deserializer=reply_type.FromString)
        return call(request, timeout=timeout)

    def options(self):
        return self._unary("GetDevicePluginOptions", self.pb.Empty(), self.pb.DevicePluginOptions)

    def list_and_watch(self, timeout=120):
        """The stream of ListAndWatchResponse; cancel() it when done. It ends
        (DEADLINE_EXCEEDED) after timeout seconds, so that a test waiting for
        an update that never comes fails instead of hanging."""
        call = self.channel.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                                         request_serializer=self.pb.Empty.SerializeToString,
                                         response_deserializer=self.pb.ListAndWatchResponse.FromString)
        return call(self.pb.Empty(), timeout=timeout)

    def preferred(self, available, size, must_include=()):
        req = self.pb.PreferredAllocationRequest(container_requests=[
            self.pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(available), must_include_deviceIDs=list(must_include),
                allocation_size=size)])
        reply = self._unary("GetPreferredAllocation", req, self.pb.PreferredAllocationResponse)
        return list(reply.container_responses[0].deviceIDs)

    def allocate(self, *containers):
        """containers: each a list of share ids; returns the AllocateResponse."""
        req = self.pb.AllocateRequest(container_requests=[
            self.pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers])
        return self._unary("Allocate", req, self.pb.AllocateResponse)

    def stop(self):
        if self.channel:
            self.channel.close()
        self.server.stop(grace=None)
