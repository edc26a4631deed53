/// Where in the file a key stands, and the keys the loader accepts there: `fields` checks every
/// mapping's keys against exactly one of these, so this is the whole list of keys a policy may use
/// (and what pinproxy.yaml(5) must document: ManPageTests). The raw value is the key's path prefix
/// as the man page writes it (`proxy.keylog.wait`, `rules[].host`, `pins[].at`).
public enum PolicySection: String, CaseIterable, Sendable {
    case top = "", proxy = "proxy", dns = "proxy.dns", keylog = "proxy.keylog", defaults = "defaults",
         rule = "rules[]", pinEntry = "pins[]", debug = "debug"

    public var keys: [String] {
        switch self {
        case .top: ["version", "proxy", "defaults", "resolve", "deny", "pinsets", "rules", "debug"]
        case .proxy: ["listen", "allow_clients", "allowed_ports", "deny_destinations", "dns", "max_tunnels",
                      "max_request_bytes", "header_timeout", "dns_timeout", "connect_timeout",
                      "connect_total_timeout", "probe_timeout", "client_hello_timeout", "idle_timeout", "verify_cache_ttl",
                      "drain_timeout", "log_format", "stats_interval", "keylog",
                      "upstream_proxy", "upstream_proxy_credentials_file", "relay", "metrics_listen", "plain_http",
                      "allowed_plain_ports", "workers", "control_socket", "transparent_listen", "transparent_mark",
                      "ct_log_list", "ct_log_list_key", "ct_list_max_age", "ct_stale_list"]
        case .dns: ["nameservers", "hosts_file"]
        case .keylog: ["path", "wait", "mode"]
        case .defaults: ["unpinned", "trust", "require_backup", "require_keylog", "quarantine", "mirror_checks", "ct"]
        case .rule: ["host", "ip", "ports", "pins", "pinset", "mode", "trust", "expires", "on_expiry", "require_keylog", "quarantine", "mirror_checks", "ct"]
        case .pinEntry: ["pin", "file", "kind", "at", "label", "backup"]
        case .debug: ["until", "hosts"]
        }
    }

    /// Each key with its path: `version`, `proxy.listen`, `rules[].host`.
    public var paths: [String] { keys.map { rawValue.isEmpty ? $0 : "\(rawValue).\($0)" } }
}
