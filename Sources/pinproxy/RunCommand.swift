import ArgumentParser
import Foundation
import Logging
import PinPolicy
import ProxyCore
import TLSInspection

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the proxy.",
        discussion: """
            Logs one line per event on stderr (text = logfmt, or json). SIGTERM/SIGINT stop accepting, \
            let tunnels drain up to proxy.drain_timeout and exit 0; SIGHUP reloads the policy (an invalid \
            file keeps the old one).
            """)

    @Option(name: .long, help: "The policy file.")
    var config: String = defaultConfigPath

    @Option(name: .long, help: ArgumentHelp("Listen here instead of proxy.listen (repeatable; port 0 picks one).", valueName: "ADDR:PORT"))
    var listen: [String] = []

    @Option(name: .long, help: ArgumentHelp("text (logfmt) or json; overrides proxy.log_format.", valueName: "FORMAT"))
    var logFormat: String?

    @Flag(name: .long, help: "Honour the policy's debug: section (a time-boxed bypass). Without it the section is inert.")
    var debugBypass = false

    // Hidden: the tests shrink the log queue so that a stalled stderr pipe overflows it after a few
    // hundred lines rather than after 4 MiB.
    @Option(name: .long, help: .hidden)
    var logQueueBytes: Int?

    /// How long the exit waits for queued log lines to reach stderr: ample for a reader that is
    /// reading (one that keeps up takes a full 4 MiB queue in well under a second), and a bound on what a reader
    /// that never reads can add to a stop.
    static let logFlushTimeout = 2.0

    func validate() throws {
        if let logFormat, LogFormatChoice(rawValue: logFormat) == nil { throw ValidationError("--log-format must be text or json") }
        if let logQueueBytes, logQueueBytes <= 0 { throw ValidationError("--log-queue-bytes must be positive") }
        for address in listen where SocketAddress.parse(address) == nil {
            throw ValidationError("--listen \(address): write IP:PORT, e.g. 127.0.0.1:3128 or [::1]:3128")
        }
    }

    func run() throws {
        // Absolute, so the hints that name it (`pinproxy pin … --config PATH`) work from any directory.
        let path = URL(fileURLWithPath: config).standardizedFileURL.path
        let loaded = Result { () throws(PolicyLoadError) in try PolicyLoader.load(file: path, pinFiles: PinFiles.loader) }
        let format = LogFormatChoice(rawValue: logFormat ?? ((try? loaded.get())?.proxy.logFormat.rawValue ?? "text"))!
        let sink = LogSink(format: format, queueBytes: logQueueBytes)
        LoggingSystem.bootstrap { _ in LineLogHandler(sink: sink) }
        // Every way out of here, the `stopped` line and the errors before exit 1 alike, leaves
        // through this flush: lines still queued would die with the process.
        defer { sink.flush(timeout: Self.logFlushTimeout) }
        let logger = Logger(label: "pinproxy")

        let system: TrustStore
        let snapshot: PolicySnapshot
        do {
            system = try TrustStore.system()
            snapshot = try PolicySnapshot(policy: try loaded.get(), systemStore: system)
        } catch let error as PolicyLoadError {
            for e in error.errors {
                logger.error("policy_load_failed", metadata: ["source": "\(e.file)", "line": "\(e.line)", "column": "\(e.column)", "detail": "\(e.message)"])
            }
            throw ExitCode(1)
        }
        let options = Proxy.Options(listen: listen.isEmpty ? nil : listen.compactMap { SocketAddress.parse($0) },
                                    debugBypass: debugBypass,
                                    reload: { try PolicySnapshot(policy: try PolicyLoader.load(file: path, pinFiles: PinFiles.loader), systemStore: system) },
                                    logLinesDropped: { sink.droppedLines })
        let proxy: Proxy
        do {
            proxy = try Proxy(snapshot: snapshot, logger: logger, options: options)
        } catch {
            var metadata: Logger.Metadata = ["detail": "\(error)"]
            if case Proxy.StartError.cannotListen(let address, let why) = error, why == String(cString: strerror(EADDRINUSE)) {
                // A listener, or a connection whose own end is the port: ss shows each with other flags.
                metadata["hint"] = "\(PortHolder.holding(port: address.port).hint(for: address, ephemeral: PortHolder.ephemeralRange()))"
            }
            logger.error("start_failed", metadata: metadata)
            throw ExitCode(1)
        }
        proxy.run()
    }
}
