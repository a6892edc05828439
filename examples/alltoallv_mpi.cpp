// alltoallv-mpi: the smallest MPI program that uses the fast executor.
//
//   mpicxx -std=c++20 alltoallv_mpi.cpp $(pkg-config --cflags --libs fast-executor) -o alltoallv-mpi
//   mpirun -np 8 ./alltoallv-mpi 4        # 8 ranks as 2 servers of 4 (0: one server per host)
//
// Rank i sends (i + 1) * (j + 1) KB to rank j: skewed traffic, MPI_Alltoallv's arguments
// (counts and displacements in bytes), and every received byte checked.

#include <mpi.h>

#include <charconv>
#include <cstdio>
#include <string_view>
#include <vector>

#include <fast/exec/mpi.hpp>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // One optional argument, GPUs (ranks) per server: 0 (the default) is one server per host.
    const std::string_view arg = argc > 1 ? argv[1] : "0";
    if (arg == "-h" || arg == "--help") {
        if (rank == 0)
            std::printf("usage: mpirun -np N alltoallv-mpi [GPUS_PER_SERVER]\n"
                        "One skewed alltoallv through the fast executor, every received byte checked.\n"
                        "GPUS_PER_SERVER: ranks per server, dividing N; 0 (the default): one server per host.\n");
        MPI_Finalize();
        return 0;
    }
    int gpus_per_server = 0;
    const auto [end, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), gpus_per_server);
    if (argc > 2 || ec != std::errc{} || end != arg.data() + arg.size() || gpus_per_server < 0) {
        if (rank == 0 && argc > 2)
            std::fprintf(stderr, "alltoallv-mpi: error: one argument at most, GPUS_PER_SERVER (see --help)\n");
        else if (rank == 0)
            std::fprintf(stderr,
                         "alltoallv-mpi: error: GPUS_PER_SERVER must be a non-negative integer, got '%s' "
                         "(see --help)\n",
                         argv[1]);
        MPI_Finalize();
        return 2;
    }
    int wrong = 0;
    {
        fast::exec::config cfg;
        cfg.gpus_per_server = gpus_per_server;
        fast::exec::communicator comm;
        if (fast::exec::status st = fast::exec::create(MPI_COMM_WORLD, cfg, comm); !st.ok()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, st.message());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }

        const auto n = static_cast<std::size_t>(size);
        std::vector<std::size_t> sendcounts(n), sdispls(n), recvcounts(n), rdispls(n);
        std::size_t send_bytes = 0, recv_bytes = 0;
        for (std::size_t j = 0; j < n; ++j) {
            sendcounts[j] = (rank + 1) * (j + 1) * 1000;
            sdispls[j] = send_bytes;
            send_bytes += sendcounts[j];
            recvcounts[j] = (j + 1) * (rank + 1) * 1000;
            rdispls[j] = recv_bytes;
            recv_bytes += recvcounts[j];
        }
        std::vector<unsigned char> send(send_bytes), recv(recv_bytes);
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t k = 0; k < sendcounts[j]; ++k)
                send[sdispls[j] + k] = static_cast<unsigned char>(rank * 7 + j * 13 + k);

        fast::exec::status st = comm.alltoallv(send.data(), sendcounts, sdispls, recv.data(), recvcounts, rdispls);
        if (!st.ok()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, st.message());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t k = 0; k < recvcounts[i]; ++k)
                wrong += recv[rdispls[i] + k] != static_cast<unsigned char>(i * 7 + rank * 13 + k);
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            std::printf("alltoallv on %d ranks (%d servers of %d): %s\n", size, comm.servers(), comm.gpus_per_server(),
                        wrong == 0 ? "every byte right" : "WRONG BYTES");
    } // the communicator goes before MPI_Finalize
    MPI_Finalize();
    return wrong == 0 ? 0 : 1;
}
