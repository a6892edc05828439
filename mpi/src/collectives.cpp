// The C entry points of the all-to-alls: each describes its arguments and hands them to
// dispatch.hpp with the same call through the MPI library as the fallback.

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> // Open MPI: the MPIX_ persistent collectives
#endif

#include "dispatch.hpp"

using namespace fast::mpi;

namespace {

call make_v(op_kind k, const void* sendbuf, const int* sendcounts, const int* sdispls, MPI_Datatype sendtype,
            void* recvbuf, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm) {
    const int n = ranks_of(comm);
    return {k, sendbuf, {sendcounts, sdispls, 0, n}, sendtype, recvbuf, {recvcounts, rdispls, 0, n}, recvtype, comm};
}

call make_uniform(op_kind k, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
    const int n = ranks_of(comm);
    return {k,        sendbuf, {nullptr, nullptr, sendcount, n}, sendtype, recvbuf, {nullptr, nullptr, recvcount, n},
            recvtype, comm};
}

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) || MPI_VERSION >= 4
// Persistent collectives: Open MPI 4.1 has them as the MPIX_ extension (mpi-ext.h, pcollreq);
// MPI 4.0 libraries name them MPI_Alltoall(v)_init. Both take the same arguments.
using alltoallv_init_fn = int (*)(const void*, const int[], const int[], MPI_Datatype, void*, const int[], const int[],
                                  MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request*);
using alltoall_init_fn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Info,
                                 MPI_Request*);

int alltoallv_init(alltoallv_init_fn pmpi, const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return run_nonblocking(make_v(op_kind::alltoallv_init, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                  rdispls, recvtype, comm),
                           true, request, [&] {
                               return pmpi(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                           recvtype, comm, info, request);
                           });
}

int alltoall_init(alltoall_init_fn pmpi, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return run_nonblocking(
        make_uniform(op_kind::alltoall_init, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), true,
        request, [&] { return pmpi(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request); });
}
#endif

} // namespace

extern "C" {

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    return run_blocking(make_v(op_kind::alltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                               recvtype, comm),
                        [&] {
                            return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                                  recvtype, comm);
                        });
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
    return run_blocking(
        make_uniform(op_kind::alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm),
        [&] { return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm); });
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
    return run_nonblocking(make_v(op_kind::ialltoallv, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                  rdispls, recvtype, comm),
                           false, request, [&] {
                               return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                      rdispls, recvtype, comm, request);
                           });
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    return run_nonblocking(
        make_uniform(op_kind::ialltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), false,
        request,
        [&] { return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request); });
}

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
int MPIX_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return alltoallv_init(PMPIX_Alltoallv_init, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, info, request);
}

int MPIX_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return alltoall_init(PMPIX_Alltoall_init, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                         request);
}
#endif

#if MPI_VERSION >= 4
int MPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                       void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                       MPI_Info info, MPI_Request* request) {
    return alltoallv_init(PMPI_Alltoallv_init, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, info, request);
}

int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return alltoall_init(PMPI_Alltoall_init, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                         request);
}
#endif

} // extern "C"
