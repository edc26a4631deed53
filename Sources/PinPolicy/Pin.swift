import Foundation

/// A pin: the SHA-256 of a certificate's SubjectPublicKeyInfo (`spki-sha256`, as HPKP, OkHttp and
/// curl compute it) or of the whole DER certificate (`cert-sha256`).
public struct Pin: Hashable, Sendable, CustomStringConvertible {
    public enum Kind: String, Hashable, Sendable { case spki = "spki-sha256", cert = "cert-sha256" }

    public let kind: Kind
    /// Exactly 32 bytes.
    public let digest: [UInt8]

    public init?(kind: Kind, digest: [UInt8]) {
        guard digest.count == 32 else { return nil }
        self.kind = kind
        self.digest = digest
    }

    /// Its 32 bytes hashed in bulk: sets of pins (a reload's diff, a rule index) are hashed by the
    /// hundred thousand, and the synthesized hash takes one byte at a time.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(bytesOf: digest)
    }

    /// The canonical text every alias is normalised to: `spki-sha256:<base64>`, `cert-sha256:<base64>`.
    public var description: String { "\(kind.rawValue):\(Base64.encode(digest))" }

    /// The certificate fingerprint as `openssl x509 -fingerprint -sha256` writes it.
    public var colonHex: String { digest.map { hexByte($0) }.joined(separator: ":") }

    public enum Problem: Error, Equatable, Sendable {
        case sha1, unknownForm(String), badEncoding(String), wrongLength(Int), hexSPKI(base64: String)

        public var message: String {
            switch self {
            case .sha1: return "SHA-1 pins are refused; use a SHA-256 pin (spki-sha256:…)"
            case .unknownForm(let t):
                return "'\(t)' is not a pin; write spki-sha256:<base64> or cert-sha256:<hex or base64> (aliases: sha256/…, sha256//…, pin-sha256=\"…\")"
            case .badEncoding(let t): return "'\(t)' is not valid base64 or hex"
            case .wrongLength(let n): return "the pin decodes to \(n) bytes; a SHA-256 pin is 32 bytes (44 base64 characters)"
            case .hexSPKI(let base64):
                return "spki-sha256 takes base64 (44 characters); hex is only for cert-sha256. The same 32 bytes in base64: spki-sha256:\(base64)"
            }
        }
    }

    /// Parses the canonical forms and the aliases pinproxy.yaml(5) lists: `sha256/…` (OkHttp), `sha256//…`
    /// (curl), `pin-sha256="…"` (HPKP), all SPKI pins.
    public static func parse(_ raw: String) -> Result<Pin, Problem> {
        let text = raw.trimmingSpacesAndTabs
        let lower = text.lowercased()
        if lower.hasPrefix("sha1/") || lower.hasPrefix("pin-sha1") || lower.hasPrefix("spki-sha1:") || lower.hasPrefix("cert-sha1:") {
            return .failure(.sha1)
        }
        let kind: Kind
        let body: String
        if lower.hasPrefix("spki-sha256:") {
            kind = .spki; body = String(text.dropFirst(12))
        } else if lower.hasPrefix("cert-sha256:") {
            kind = .cert; body = String(text.dropFirst(12))
        } else if lower.hasPrefix("sha256//") {
            kind = .spki; body = String(text.dropFirst(8))
        } else if lower.hasPrefix("sha256/") {
            kind = .spki; body = String(text.dropFirst(7))
        } else if lower.hasPrefix("pin-sha256=\""), text.hasSuffix("\""), text.count >= 13 {
            kind = .spki; body = String(text.dropFirst(12).dropLast())
        } else {
            return .failure(.unknownForm(text))
        }
        let digest: [UInt8]
        if kind == .spki, let hex = decodeHex(body), hex.count == 32 {
            return .failure(.hexSPKI(base64: Base64.encode(hex)))  // as base64 it would be 48 bytes: say why
        }
        if kind == .cert, let hex = decodeHex(body) {
            digest = hex
        } else if let b64 = Base64.decode(body) {
            digest = b64
        } else {
            return .failure(.badEncoding(body))
        }
        guard let pin = Pin(kind: kind, digest: digest) else { return .failure(.wrongLength(digest.count)) }
        return .success(pin)
    }

    /// 64 hex digits, or 32 colon-separated pairs.
    static func decodeHex(_ text: String) -> [UInt8]? {
        // Base64 (nearly every pin) has other letters: said at once, without cutting it into pairs.
        guard text.allSatisfy({ $0 == ":" || $0.isHexDigit }) else { return nil }
        let groups: [Substring]
        if text.contains(":") {
            groups = text.split(separator: ":", omittingEmptySubsequences: false)
            guard groups.allSatisfy({ $0.count == 2 }) else { return nil }
        } else {
            guard text.count % 2 == 0 else { return nil }
            var pairs: [Substring] = []
            var index = text.startIndex
            while index < text.endIndex {
                let next = text.index(index, offsetBy: 2)
                pairs.append(text[index..<next])
                index = next
            }
            groups = pairs
        }
        var out: [UInt8] = []
        for group in groups {
            guard group.allSatisfy(\.isHexDigit), let byte = UInt8(group, radix: 16) else { return nil }
            out.append(byte)
        }
        return out.isEmpty ? nil : out
    }
}

func hexByte(_ b: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(b >> 4)], digits[Int(b & 0x0f)]])
}

extension String {
    /// Without leading and trailing spaces and tabs (HTTP's OWS; YAML values as written).
    public var trimmingSpacesAndTabs: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}

/// Where in the verified chain a pin may match: position 0 (`leaf`), any position ≥ 1 including the
/// trust anchor (`ca`), or anywhere (`any`).
public enum PinPosition: String, Hashable, Sendable {
    case leaf, ca, any

    public func allows(position: Int) -> Bool {
        switch self {
        case .leaf: return position == 0
        case .ca: return position >= 1
        case .any: return true
        }
    }
}

/// One accepted pin of a rule, with where it may match and the label logs use for it.
public struct PinEntry: Hashable, Sendable, CustomStringConvertible {
    public let pin: Pin
    public let position: PinPosition
    public let label: String?
    /// Where it came from in the policy file, for messages.
    public let line: Int
    /// For a `file:` pin: the file, and the certificate's notAfter when it held one (for lint).
    public let file: String?
    public let notAfter: Date?
    /// `backup: true` on an `at: ca` pin: the operator accepts this CA as the rule's backup (any key
    /// the CA certifies for the name passes when the leaf key changes), so a chain that matches every
    /// pin of the rule is not reported as having no real backup.
    public let acceptedBackup: Bool

    public init(pin: Pin, position: PinPosition? = nil, label: String? = nil, line: Int = 0, file: String? = nil,
                notAfter: Date? = nil, acceptedBackup: Bool = false) {
        self.pin = pin
        self.position = position ?? (pin.kind == .spki ? .any : .leaf)
        self.label = label
        self.line = line
        self.file = file
        self.notAfter = notAfter
        self.acceptedBackup = acceptedBackup
    }

    public var description: String {
        var s = "\(pin) at=\(position.rawValue)"
        if let label { s += " (\(label))" }
        if acceptedBackup { s += " backup" }
        return s
    }
}
