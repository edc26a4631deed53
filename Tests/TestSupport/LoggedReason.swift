import PinPolicy
import ProxyCore

extension RefusedReason {
    /// A refusal by the pin policy.
    public static func policy(_ reason: RefusalReason) -> RefusedReason { .decision(.policy(reason)) }
    /// A refusal pinproxy decides without the policy: the request, a limit, the network.
    public static func network(_ reason: NetworkRefusal) -> RefusedReason { .decision(.network(reason)) }

    /// A log line's `reason` as the proxy's own enums, so a test compares values and a reason renamed
    /// in the code cannot leave a test asserting the old text. A `stage=stream` (or `mirror`) line names a stream
    /// reason (its `tls_protocol_error` or `pin_mismatch` is the stream's, not the probe's); nil when
    /// the line has no `reason` or it names no refusal.
    public init?(line: [String: String]) {
        guard let code = line["reason"] else { return nil }
        if line["stage"] == "stream" || line["stage"] == "mirror" {
            guard let reason = StreamReason.all.first(where: { $0.code == code }) else { return nil }
            self = .stream(reason)
        } else if let reason = RefusalReason(rawValue: code) {
            self = .policy(reason)
        } else if let reason = NetworkRefusal(rawValue: code) {
            self = .network(reason)
        } else {
            return nil
        }
    }
}

extension Dictionary where Key == String, Value == String {
    /// This log line's `reason`, parsed (see `RefusedReason(line:)`).
    public var refusal: RefusedReason? { RefusedReason(line: self) }
}
