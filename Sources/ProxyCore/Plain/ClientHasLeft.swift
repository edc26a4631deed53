import Foundation

/// Whether a client that has a request in flight has left, asked of its socket without reading
/// it (what it sent may be a pipelined request waiting its turn): a reset (`client_error`), or the
/// end of what it sends (`client_closed`). A half-close counts as leaving, as for Squid
/// (`half_closed_clients off`) and nginx: a client that shuts down its sending side after a
/// request cannot be told from one that closed and went away, and waiting for the server to
/// answer either kept two descriptors per abandoned request for up to `idle_timeout`.
func clientHasLeft(fd: Int32) -> ExchangeMachine.ClientEnd? {
    var probe = pollfd(fd: fd, events: Int16(pollRDHUP), revents: 0)
    guard poll(&probe, 1, 0) == 1 else { return nil }
    if probe.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return .failed }
    if probe.revents & Int16(pollRDHUP) != 0 { return .closed }
    return nil
}

/// POLLRDHUP (Linux, <poll.h> with _GNU_SOURCE, which Swift's Glibc module does not define).
private let pollRDHUP: Int32 = 0x2000
