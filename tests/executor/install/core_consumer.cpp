// Built against the installed headers with a plain C++ compiler and `pkg-config fast-executor`
// only: the core API needs no UCX, MPI or CUDA flags. One rank, bootstrapped without MPI.
#include <fast/exec/exec.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

int main() {
    fast::exec::bootstrap boot{0, 1, [](const void* s, void* r, std::size_t n) {
                                   std::memcpy(r, s, n);
                                   return fast::exec::status{};
                               }};
    fast::exec::communicator comm;
    if (fast::exec::status st = fast::exec::create(boot, fast::exec::config{}, comm); !st.ok()) {
        std::printf("create: %s\n", st.message());
        return 1;
    }
    std::vector<unsigned char> send(1000), recv(1000);
    for (std::size_t k = 0; k < send.size(); ++k) send[k] = static_cast<unsigned char>(k);
    const std::vector<std::size_t> counts{1000}, displs{0};
    const fast::exec::status st = comm.alltoallv(send.data(), counts, displs, recv.data(), counts, displs);
    std::printf("core API, one rank: %s\n", st.ok() && send == recv ? "ok" : st.message());
    return st.ok() && send == recv ? 0 : 1;
}
