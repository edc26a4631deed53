import PinPolicy

extension Proxy {
    /// How the proxy is started, beyond its policy.
    public struct Options {
        public var listen: [SocketAddress]?
        public var debugBypass = false
        /// Loads a fresh snapshot for SIGHUP; nil disables reload.
        public var reload: (() throws -> PolicySnapshot)?
        /// Log lines dropped so far (the metrics' `pinproxy_log_lines_dropped_total`).
        public var logLinesDropped: (@Sendable () -> Int)?

        public init(listen: [SocketAddress]? = nil, debugBypass: Bool = false, reload: (() throws -> PolicySnapshot)? = nil,
                    logLinesDropped: (@Sendable () -> Int)? = nil) {
            self.listen = listen
            self.debugBypass = debugBypass
            self.reload = reload
            self.logLinesDropped = logLinesDropped
        }
    }
}
