import PinPolicy
import TLSInspection

/// A probe's chain judged under the CONNECT's snapshot and rule, with its evidence. An immutable
/// object, not a value: an open tunnel's state, its records and its stream check share one, so a
/// held tunnel does not carry its ~300 bytes inline in each of them.
final class Judgement {
    let address: SocketAddress
    let tlsVersion: TLSVersion?
    let keyProof: KeyProof
    let validation: ChainValidation
    let evaluation: Evaluation
    /// The certificates the server presented, as DER: a tunnel that receives exactly these needs
    /// no second validation.
    let presentedDER: [[UInt8]]
    /// The chain came from the verification cache (an earlier probe), not a handshake of its own.
    let cached: Bool
    /// The SCTs the probe's server sent beside the chain, for CT (judged again on a reload).
    let delivered: DeliveredSCTs

    init(address: SocketAddress, tlsVersion: TLSVersion?, keyProof: KeyProof, validation: ChainValidation, evaluation: Evaluation,
         presentedDER: [[UInt8]], cached: Bool = false, delivered: DeliveredSCTs = .none) {
        self.address = address
        self.tlsVersion = tlsVersion
        self.keyProof = keyProof
        self.validation = validation
        self.evaluation = evaluation
        self.presentedDER = presentedDER
        self.cached = cached
        self.delivered = delivered
    }
}
