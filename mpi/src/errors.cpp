#include "errors.hpp"

#include <map>
#include <mutex>

namespace fast::mpi {

int error_class(fast::exec::errc code) noexcept {
    using fast::exec::errc;
    switch (code) {
    case errc::ok: return MPI_SUCCESS;
    case errc::invalid_argument: return MPI_ERR_ARG;
    case errc::count_mismatch: return MPI_ERR_TRUNCATE;
    case errc::out_of_memory: return MPI_ERR_NO_MEM;
    case errc::unsupported: return MPI_ERR_UNSUPPORTED_OPERATION;
    case errc::internal: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER; // bootstrap, timeout, peer_failure, transport, busy, comm_failed
    }
}

int error_code(int mpi_class, const std::string& what, const std::string& message) noexcept {
    static std::mutex mutex;
    static std::map<int, int> code_of_class;
    try {
        std::lock_guard lock(mutex);
        auto it = code_of_class.find(mpi_class);
        if (it == code_of_class.end()) {
            int code = 0;
            if (PMPI_Add_error_code(mpi_class, &code) != MPI_SUCCESS) return mpi_class;
            it = code_of_class.emplace(mpi_class, code).first;
        }
        std::string text = "fast_mpi: " + what + ": " + message;
        if (text.size() >= MPI_MAX_ERROR_STRING) text.resize(MPI_MAX_ERROR_STRING - 1);
        if (PMPI_Add_error_string(it->second, text.c_str()) != MPI_SUCCESS) return mpi_class;
        return it->second;
    } catch (...) {
        return mpi_class; // out of memory: the class alone still says what kind of failure
    }
}

int error_code(const fast::exec::status& st, const char* what) noexcept {
    try {
        return error_code(error_class(st.code()), what, st.message());
    } catch (...) {
        return error_class(st.code());
    }
}

int raise(MPI_Comm comm, int code) noexcept {
    if (code != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, code);
    return code;
}

} // namespace fast::mpi
