// Built against the installed headers with mpicxx and `pkg-config fast-executor` only: a skewed
// alltoallv with non-packed displacements (blocks in reverse order, gaps between them), every
// byte checked on every rank. Run it on 8 ranks as 2 servers: mpirun -np 8 mpi_consumer 4
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fast/exec/mpi.hpp>

namespace {
unsigned char byte(std::size_t src, std::size_t dst, std::size_t k) {
    return static_cast<unsigned char>(src * 37 + dst * 11 + k * 3 + (k >> 8));
}
} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long wrong = 0;
    {
        fast::exec::config cfg;
        cfg.gpus_per_server = argc > 1 ? std::atoi(argv[1]) : 0;
        cfg.timeout = std::chrono::seconds(30);
        fast::exec::communicator comm;
        fast::exec::status st = fast::exec::create(MPI_COMM_WORLD, cfg, comm);
        const auto n = static_cast<std::size_t>(size), me = static_cast<std::size_t>(rank);
        // Skewed: one hot receiver (rank 0) and a hot sender (the last rank).
        auto bytes = [&](std::size_t src, std::size_t dst) -> std::size_t {
            return 500 + 3000 * ((src * 7 + dst * 3) % 5) + (dst == 0 ? 200000 : 0) + (src == n - 1 ? 50000 : 0);
        };
        std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
        std::size_t s = 0, r = 0;
        for (std::size_t k = n; k-- > 0;) { // reverse block order, 64-byte gaps
            sc[k] = bytes(me, k);
            sd[k] = s;
            s += sc[k] + 64;
            rc[k] = bytes(k, me);
            rd[k] = r;
            r += rc[k] + 64;
        }
        std::vector<unsigned char> send(s, 0xEE), recv(r, 0xA5);
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t k = 0; k < sc[j]; ++k) send[sd[j] + k] = byte(me, j, k);
        if (st.ok()) st = comm.alltoallv(send.data(), sc, sd, recv.data(), rc, rd);
        if (!st.ok()) {
            std::fprintf(stderr, "rank %d: %s\n", rank, st.message());
            wrong = 1;
        } else {
            std::vector<unsigned char> expected(r, 0xA5);
            for (std::size_t i = 0; i < n; ++i)
                for (std::size_t k = 0; k < rc[i]; ++k) expected[rd[i] + k] = byte(i, me, k);
            for (std::size_t k = 0; k < r; ++k) wrong += recv[k] != expected[k];
        }
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            std::printf("installed fast-executor: skewed alltoallv on %d ranks as %d servers: %s\n", size,
                        comm.servers(), wrong == 0 ? "every byte right" : "WRONG");
    }
    MPI_Finalize();
    return wrong == 0 ? 0 : 1;
}
