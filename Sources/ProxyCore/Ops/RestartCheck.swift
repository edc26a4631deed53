import PinPolicy

/// What a reload read but cannot apply to the running process: the sockets, the resolver, the worker
/// loops and the key-log file stay as they were made at start. (`allow_clients` is not among them:
/// each accept reads it from the snapshot in force.) A value with what was made at start, without
/// I/O, so that it is checked with two policies and no process.
struct RestartCheck {
    /// Whether `proxy.listen` chose the sockets (not `--listen` or socket activation).
    let listensWherePolicySays: Bool
    let boundAddresses: [SocketAddress]
    let metricsAddress: SocketAddress?
    /// The control socket's path, as made at start.
    let controlSocket: String?
    let workerCount: Int
    let keyLog: KeyLogSettings?

    /// One (setting, what keeps running) per setting the reload changed but cannot apply.
    func changes(from old: Policy, to new: Policy) -> [(setting: String, detail: String)] {
        var changed: [(String, String)] = []
        if old.proxy.listen != new.proxy.listen && listensWherePolicySays {
            changed.append(("proxy.listen", "pinproxy keeps listening on \(boundAddresses.map(\.description).joined(separator: ","))"))
        }
        if old.proxy.dns != new.proxy.dns { changed.append(("proxy.dns", "pinproxy keeps the resolver it started with")) }
        if old.proxy.metricsListen != new.proxy.metricsListen {
            changed.append(("proxy.metrics_listen", "pinproxy keeps serving metrics \(metricsAddress.map { "on \($0)" } ?? "nowhere")"))
        }
        if old.proxy.controlSocket != new.proxy.controlSocket {
            changed.append(("proxy.control_socket", "pinproxy keeps its control socket \(controlSocket ?? "off")"))
        }
        if old.proxy.workers != new.proxy.workers {
            changed.append(("proxy.workers", "pinproxy keeps its \(workerCount) worker loops"))
        }
        switch (keyLog, new.proxy.keylog) {
        case (nil, nil):
            break
        case (let running?, let wanted) where running.needsRestart(comparedTo: wanted):
            let what = wanted.map { "now \($0.path) mode \($0.modeText)" } ?? "now absent"
            changed.append(("proxy.keylog", "pinproxy keeps following \(running.path) (mode \(running.modeText)), \(what)"))
        case (nil, let wanted?):
            changed.append(("proxy.keylog", "pinproxy follows no key log; \(wanted.path) is read only after a restart, so TLS 1.3 tunnels stay probe-only (or refused under require_keylog) until then"))
        default:
            break
        }
        changed += transparentChanges(from: old, to: new)  // RestartCheck+Transparent.swift
        return changed
    }
}
