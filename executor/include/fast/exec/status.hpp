#pragma once
/// \file status.hpp
/// What every call of the executor returns: an error code and a one-line message. The executor
/// never throws across its API and never ends the process; it reports through `status`.

#include <memory>
#include <new>
#include <string>
#include <string_view>

namespace fast::exec {

/// Error codes. Errors that depend on what all ranks passed (count_mismatch, invalid_argument of
/// another rank, out_of_memory of another rank) are reported with the same code and message on
/// every rank, so that no rank is left waiting for another.
enum class errc : int {
    ok = 0,
    invalid_argument, ///< an argument or configuration is invalid (on this rank or, named, another)
    count_mismatch,   ///< a rank's recvcounts disagree with what the senders send it
    out_of_memory,    ///< host or device memory (scratch) could not be allocated
    unsupported,      ///< this build or this UCX lacks a requested feature (e.g. CUDA memory)
    bootstrap,        ///< the allgather callback failed or timed out
    timeout,          ///< a wait passed config::timeout
    peer_failure,     ///< UCX reported a failed peer or connection
    transport,        ///< another UCX error
    busy,             ///< another operation of this communicator is in progress
    comm_failed,      ///< an earlier timeout or transport error left the communicator unusable
    internal,         ///< an invariant of the executor or of the plan broke (a bug)
};

/// The name of an error code ("ok", "count_mismatch", ...).
[[nodiscard]] constexpr std::string_view to_string(errc e) noexcept {
    switch (e) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::count_mismatch: return "count_mismatch";
    case errc::out_of_memory: return "out_of_memory";
    case errc::unsupported: return "unsupported";
    case errc::bootstrap: return "bootstrap";
    case errc::timeout: return "timeout";
    case errc::peer_failure: return "peer_failure";
    case errc::transport: return "transport";
    case errc::busy: return "busy";
    case errc::comm_failed: return "comm_failed";
    case errc::internal: return "internal";
    }
    return "unknown";
}

/// The outcome of a call: ok, or an error code with a message. Cheap to copy (the message is
/// shared); constructing one never throws (if the message cannot be allocated, message() falls
/// back to the code's name).
class [[nodiscard]] status {
public:
    /// Success.
    status() noexcept = default;

    status(errc code, std::string_view message) noexcept : code_(code) {
        if (code_ == errc::ok) return;
        try {
            message_ = std::make_shared<const std::string>(message);
        } catch (...) {
            message_.reset(); // message() falls back to the code's name
        }
    }

    [[nodiscard]] bool ok() const noexcept { return code_ == errc::ok; }
    explicit operator bool() const noexcept { return ok(); }
    [[nodiscard]] errc code() const noexcept { return code_; }

    /// "ok", or one line that says what failed, on which rank and why. Valid while this status
    /// (or a copy of it) lives.
    [[nodiscard]] const char* message() const noexcept {
        if (message_) return message_->c_str();
        return to_string(code_).data(); // the names are NUL-terminated literals
    }

private:
    errc code_ = errc::ok;
    std::shared_ptr<const std::string> message_;
};

} // namespace fast::exec
