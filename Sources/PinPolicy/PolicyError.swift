/// One problem in a policy file, with where it is.
public struct PolicyError: Error, Hashable, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let column: Int
    public let message: String

    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `file:line:column: message`, the form editors and CI annotate.
    public var description: String { "\(file):\(line):\(column): \(message)" }
}

/// Every problem found while loading; the policy is not used.
public struct PolicyLoadError: Error, Hashable, Sendable, CustomStringConvertible {
    public let errors: [PolicyError]

    public init(_ errors: [PolicyError]) { self.errors = errors }

    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// What a `file:` pin names, read by the caller's loader (`TLSInspection` for the CLI and the proxy),
/// so that `PinPolicy` receives only digests.
public struct PinFileContents: Sendable {
    public let pin: Pin
    /// The certificate's notAfter when the file held a certificate.
    public let notAfter: Date?

    public init(pin: Pin, notAfter: Date?) {
        self.pin = pin
        self.notAfter = notAfter
    }
}

/// Reads a PEM/DER certificate or public key at an absolute path and returns its pin of `kind`.
/// Throws an error whose description is shown to the user.
public typealias PinFileLoader = @Sendable (_ path: String, _ kind: Pin.Kind) throws -> PinFileContents

import Foundation
