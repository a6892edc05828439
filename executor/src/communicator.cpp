// The public API of <fast/exec/communicator.hpp>: handles over communicator_impl and
// request_impl that never throw (every exception becomes a status). The work is in
// communicator_setup.cpp (creation), communicator_call.cpp (calls), count_agreement.cpp and its
// kinds (gather_agreement.cpp, servers_agreement.cpp), communicator_exchange.cpp,
// persistent_request.cpp, communicator_trace.cpp and communicator_teardown.cpp.

#include "communicator_impl.hpp"

#include <new>

namespace fast::exec {

// --- public API ---------------------------------------------------------------------------------

namespace {

status out_of_memory() noexcept {
    return status(errc::out_of_memory, "out of host memory");
}
status unexpected() noexcept {
    return status(errc::internal, "unexpected exception inside the executor");
}
status not_created() noexcept {
    return status(errc::invalid_argument, "the communicator was not created (or was moved from)");
}
status not_initialised() noexcept {
    return status(errc::invalid_argument, "the request was not initialised by alltoallv_init");
}

// The public API never throws: whatever `body` throws becomes a status.
template <class Body>
status guarded(Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return out_of_memory();
    } catch (...) {
        return unexpected();
    }
}

} // namespace

status create(const bootstrap& boot, const config& cfg, communicator& out) noexcept {
    return guarded([&] {
        out.impl_.reset();
        if (boot.size < 1 || boot.rank < 0 || boot.rank >= boot.size)
            return status(errc::invalid_argument, "bootstrap: rank " + std::to_string(boot.rank) + " of size " +
                                                      std::to_string(boot.size) + " is not a valid rank");
        if (!boot.allgather) return status(errc::invalid_argument, "bootstrap: no allgather function");
        auto impl = std::make_shared<detail::communicator_impl>();
        status s = impl->create(boot, cfg);
        if (s.ok()) out.impl_ = std::move(impl);
        return s;
    });
}

communicator::communicator() noexcept = default;
communicator::~communicator() = default;
communicator::communicator(communicator&&) noexcept = default;
communicator& communicator::operator=(communicator&&) noexcept = default;

bool communicator::valid() const noexcept {
    return impl_ != nullptr;
}
int communicator::rank() const noexcept {
    return impl_ ? impl_->rank() : -1;
}
int communicator::size() const noexcept {
    return impl_ ? impl_->size() : 0;
}
int communicator::servers() const noexcept {
    return impl_ ? impl_->servers() : 0;
}
int communicator::gpus_per_server() const noexcept {
    return impl_ ? impl_->gpus_per_server() : 0;
}
exec::agreement communicator::agreement() const noexcept {
    return impl_ ? impl_->agreement() : exec::agreement::automatic;
}
statistics communicator::stats() const noexcept {
    return impl_ ? impl_->stats() : statistics{};
}

status communicator::alltoallv(const void* send, std::span<const std::size_t> sendcounts,
                               std::span<const std::size_t> sdispls, void* recv,
                               std::span<const std::size_t> recvcounts, std::span<const std::size_t> rdispls) noexcept {
    if (!impl_) return not_created();
    return guarded([&] { return impl_->alltoallv({send, sendcounts, sdispls, recv, recvcounts, rdispls}); });
}

status communicator::alltoallv_init(const void* send, std::span<const std::size_t> sendcounts,
                                    std::span<const std::size_t> sdispls, void* recv,
                                    std::span<const std::size_t> recvcounts, std::span<const std::size_t> rdispls,
                                    alltoallv_request& request) noexcept {
    if (!impl_) return not_created();
    return guarded([&] {
        request.impl_.reset();
        // Everything this rank allocates comes before init, which agrees with the peers: after it,
        // running out of memory would leave them a request this rank does not have.
        auto r = std::make_unique<detail::request_impl>();
        r->execution = std::make_unique<detail::operation>(impl_->transport(), impl_->memory(), impl_->timeout(),
                                                           impl_->rank(), impl_->credits());
        if (impl_->trace().on()) r->sendcounts.assign(sendcounts.begin(), sendcounts.end());
        if (status s = impl_->init({send, sendcounts, sdispls, recv, recvcounts, rdispls}, r->compiled); !s.ok())
            return s;
        r->comm = impl_;
        r->send = send;
        r->recv = recv;
        request.impl_ = std::move(r);
        return status{};
    });
}

alltoallv_request::alltoallv_request() noexcept = default;
alltoallv_request::~alltoallv_request() = default;
alltoallv_request::alltoallv_request(alltoallv_request&&) noexcept = default;
alltoallv_request& alltoallv_request::operator=(alltoallv_request&&) noexcept = default;

bool alltoallv_request::valid() const noexcept {
    return impl_ != nullptr;
}
bool alltoallv_request::active() const noexcept {
    return impl_ && impl_->active;
}

status alltoallv_request::start() noexcept {
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->start(); });
}

status alltoallv_request::test(bool& done) noexcept {
    done = true;
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->test(done); });
}

status alltoallv_request::wait() noexcept {
    if (!impl_) return not_initialised();
    return guarded([&] { return impl_->wait(); });
}

} // namespace fast::exec
