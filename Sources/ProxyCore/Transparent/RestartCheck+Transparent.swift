import PinPolicy

extension RestartCheck {
    /// Transparent mode's settings, fixed at start: its listeners, and the mark every upstream
    /// socket gets (`UpstreamMark`).
    func transparentChanges(from old: Policy, to new: Policy) -> [(setting: String, detail: String)] {
        var changed: [(String, String)] = []
        let (was, now) = (old.proxy.transparent, new.proxy.transparent)
        if was.listen != now.listen {
            let running = was.listen.isEmpty ? "keeps transparent mode off" : "keeps its transparent listeners on \(was.listen.map(\.description).joined(separator: ","))"
            changed.append(("proxy.transparent_listen", "pinproxy \(running)"))
        }
        if was.mark != now.mark {
            changed.append(("proxy.transparent_mark", "pinproxy keeps marking its upstream connections \(was.mark.map { "0x" + String($0, radix: 16) } ?? "with no mark")"))
        }
        return changed
    }
}
