// The hosted page's words in each language it speaks. Payer words only: never an internal status
// name. Functions take values already escaped by the caller where they end up in HTML.

export const LANGS = ["en", "fr", "es", "de"] as const;
export type Lang = (typeof LANGS)[number];

export interface Messages {
  languageName: string;
  languageNav: string;
  pay: (merchant: string) => string;
  waiting: string;
  confirming: string;
  paid: string;
  expired: string;
  cancelled: string;
  refunded: string;
  failed: string;
  failedContact: string;
  partialRefund: (refunded: string, received: string) => string;
  sandbox: string;
  sendExactly: (amount: string) => string;
  network: string;
  chainId: (id: string) => string;
  sendOnlyOn: (token: string, network: string) => string;
  toAddress: string;
  receivingAddress: string;
  copy: string;
  qrLabel: string;
  scan: string;
  openInWallet: string;
  payWithWallet: string;
  payWithCard: string;
  expiresIn: string;
  returnToMerchant: string;
  viewReceipt: string;
  otherNetworks: string;
  sendOnce: string;
  notFoundTitle: string;
  notFoundText: string;
  receiptTitle: string;
  receiptNotReady: string;
  backToPayment: string;
  merchant: string;
  amount: string;
  token: string;
  method: string;
  card: string;
  transaction: string;
  time: string;
  payer: string;
  paymentId: string;
  print: string;
  // The script's words (reach it as JSON data).
  script: {
    copied: string;
    copyManually: string;
    connecting: string;
    switching: string;
    addingNetwork: string;
    addNetwork: string;
    confirmInWallet: string;
    sent: string;
    rejected: string;
    walletError: string;
  };
}

const en: Messages = {
  languageName: "English",
  languageNav: "Language",
  pay: (m) => `Pay ${m}`,
  waiting: "Waiting for your payment",
  confirming: "Payment received, confirming…",
  paid: "Paid",
  expired: "Expired",
  cancelled: "Cancelled",
  refunded: "Refunded",
  failed: "Payment could not be completed",
  failedContact: "Please contact the merchant: no money was lost, they can sort it out with you.",
  partialRefund: (r, t) => `Refunded ${r} of ${t}`,
  sandbox: "Sandbox — no real money moves",
  sendExactly: (a) => `Send exactly ${a}`,
  network: "Network",
  chainId: (id) => `chain id ${id}`,
  sendOnlyOn: (t, n) => `Send ${t} on ${n} only`,
  toAddress: "To this address",
  receivingAddress: "Receiving address",
  copy: "Copy",
  qrLabel: "QR code of the payment request",
  scan: "Scan with a wallet",
  openInWallet: "Open in a wallet app",
  payWithWallet: "Pay with browser wallet",
  payWithCard: "Pay with card",
  expiresIn: "Expires in",
  returnToMerchant: "Return to merchant",
  viewReceipt: "View receipt",
  otherNetworks: "Pay on another network:",
  sendOnce: "Send once, on one network only.",
  notFoundTitle: "Payment not found",
  notFoundText: "Check the link you were given, or contact the merchant.",
  receiptTitle: "Receipt",
  receiptNotReady: "There is no receipt yet: this payment has not been paid.",
  backToPayment: "Back to the payment",
  merchant: "Merchant",
  amount: "Amount",
  token: "Token",
  method: "Method",
  card: "Card",
  transaction: "Transaction",
  time: "Time",
  payer: "Paid from",
  paymentId: "Payment ID",
  print: "Print",
  script: {
    copied: "Address copied",
    copyManually: "Select the address and copy it",
    connecting: "Connecting to your wallet…",
    switching: "Switching network…",
    addingNetwork: "Adding {network} to your wallet…",
    addNetwork: "Add {network} to your wallet, then try again",
    confirmInWallet: "Confirm the payment in your wallet…",
    sent: "Sent — waiting for confirmation. Transaction: {hash}",
    rejected: "You declined the request in your wallet.",
    walletError: "Your wallet could not send the payment: {message}",
  },
};

const fr: Messages = {
  languageName: "Français",
  languageNav: "Langue",
  pay: (m) => `Payer ${m}`,
  waiting: "En attente de votre paiement",
  confirming: "Paiement reçu, confirmation en cours…",
  paid: "Payé",
  expired: "Expiré",
  cancelled: "Annulé",
  refunded: "Remboursé",
  failed: "Le paiement n’a pas pu aboutir",
  failedContact: "Veuillez contacter le marchand : il pourra régler la situation avec vous.",
  partialRefund: (r, t) => `Remboursé : ${r} sur ${t}`,
  sandbox: "Bac à sable — aucun argent réel ne circule",
  sendExactly: (a) => `Envoyez exactement ${a}`,
  network: "Réseau",
  chainId: (id) => `identifiant de chaîne ${id}`,
  sendOnlyOn: (t, n) => `Envoyez des ${t} sur ${n} uniquement`,
  toAddress: "À cette adresse",
  receivingAddress: "Adresse de réception",
  copy: "Copier",
  qrLabel: "Code QR de la demande de paiement",
  scan: "Scannez avec un portefeuille",
  openInWallet: "Ouvrir dans une application de portefeuille",
  payWithWallet: "Payer avec le portefeuille du navigateur",
  payWithCard: "Payer par carte",
  expiresIn: "Expire dans",
  returnToMerchant: "Retour au marchand",
  viewReceipt: "Voir le reçu",
  otherNetworks: "Payer sur un autre réseau :",
  sendOnce: "Envoyez une seule fois, sur un seul réseau.",
  notFoundTitle: "Paiement introuvable",
  notFoundText: "Vérifiez le lien reçu ou contactez le marchand.",
  receiptTitle: "Reçu",
  receiptNotReady: "Pas encore de reçu : ce paiement n’a pas été réglé.",
  backToPayment: "Retour au paiement",
  merchant: "Marchand",
  amount: "Montant",
  token: "Jeton",
  method: "Moyen de paiement",
  card: "Carte",
  transaction: "Transaction",
  time: "Date",
  payer: "Payé depuis",
  paymentId: "Identifiant du paiement",
  print: "Imprimer",
  script: {
    copied: "Adresse copiée",
    copyManually: "Sélectionnez l’adresse et copiez-la",
    connecting: "Connexion à votre portefeuille…",
    switching: "Changement de réseau…",
    addingNetwork: "Ajout de {network} à votre portefeuille…",
    addNetwork: "Ajoutez {network} à votre portefeuille, puis réessayez",
    confirmInWallet: "Confirmez le paiement dans votre portefeuille…",
    sent: "Envoyé — en attente de confirmation. Transaction : {hash}",
    rejected: "Vous avez refusé la demande dans votre portefeuille.",
    walletError: "Votre portefeuille n’a pas pu envoyer le paiement : {message}",
  },
};

const es: Messages = {
  languageName: "Español",
  languageNav: "Idioma",
  pay: (m) => `Pagar a ${m}`,
  waiting: "Esperando su pago",
  confirming: "Pago recibido, confirmando…",
  paid: "Pagado",
  expired: "Caducado",
  cancelled: "Cancelado",
  refunded: "Reembolsado",
  failed: "No se pudo completar el pago",
  failedContact: "Póngase en contacto con el comercio: podrá resolverlo con usted.",
  partialRefund: (r, t) => `Reembolsado ${r} de ${t}`,
  sandbox: "Entorno de pruebas — no se mueve dinero real",
  sendExactly: (a) => `Envíe exactamente ${a}`,
  network: "Red",
  chainId: (id) => `id de cadena ${id}`,
  sendOnlyOn: (t, n) => `Envíe ${t} solo en ${n}`,
  toAddress: "A esta dirección",
  receivingAddress: "Dirección de recepción",
  copy: "Copiar",
  qrLabel: "Código QR de la solicitud de pago",
  scan: "Escanee con una billetera",
  openInWallet: "Abrir en una app de billetera",
  payWithWallet: "Pagar con la billetera del navegador",
  payWithCard: "Pagar con tarjeta",
  expiresIn: "Caduca en",
  returnToMerchant: "Volver al comercio",
  viewReceipt: "Ver recibo",
  otherNetworks: "Pagar en otra red:",
  sendOnce: "Envíe una sola vez, en una sola red.",
  notFoundTitle: "Pago no encontrado",
  notFoundText: "Compruebe el enlace recibido o contacte con el comercio.",
  receiptTitle: "Recibo",
  receiptNotReady: "Aún no hay recibo: este pago no se ha realizado.",
  backToPayment: "Volver al pago",
  merchant: "Comercio",
  amount: "Importe",
  token: "Token",
  method: "Método",
  card: "Tarjeta",
  transaction: "Transacción",
  time: "Fecha",
  payer: "Pagado desde",
  paymentId: "ID del pago",
  print: "Imprimir",
  script: {
    copied: "Dirección copiada",
    copyManually: "Seleccione la dirección y cópiela",
    connecting: "Conectando con su billetera…",
    switching: "Cambiando de red…",
    addingNetwork: "Añadiendo {network} a su billetera…",
    addNetwork: "Añada {network} a su billetera y vuelva a intentarlo",
    confirmInWallet: "Confirme el pago en su billetera…",
    sent: "Enviado — esperando confirmación. Transacción: {hash}",
    rejected: "Rechazó la solicitud en su billetera.",
    walletError: "Su billetera no pudo enviar el pago: {message}",
  },
};

const de: Messages = {
  languageName: "Deutsch",
  languageNav: "Sprache",
  pay: (m) => `${m} bezahlen`,
  waiting: "Wir warten auf Ihre Zahlung",
  confirming: "Zahlung erhalten, wird bestätigt…",
  paid: "Bezahlt",
  expired: "Abgelaufen",
  cancelled: "Storniert",
  refunded: "Erstattet",
  failed: "Die Zahlung konnte nicht abgeschlossen werden",
  failedContact: "Bitte wenden Sie sich an den Händler: Er klärt das mit Ihnen.",
  partialRefund: (r, t) => `Erstattet: ${r} von ${t}`,
  sandbox: "Testumgebung — es wird kein echtes Geld bewegt",
  sendExactly: (a) => `Senden Sie genau ${a}`,
  network: "Netzwerk",
  chainId: (id) => `Chain-ID ${id}`,
  sendOnlyOn: (t, n) => `Senden Sie ${t} nur im Netzwerk ${n}`,
  toAddress: "An diese Adresse",
  receivingAddress: "Empfangsadresse",
  copy: "Kopieren",
  qrLabel: "QR-Code der Zahlungsanforderung",
  scan: "Mit einer Wallet scannen",
  openInWallet: "In einer Wallet-App öffnen",
  payWithWallet: "Mit Browser-Wallet bezahlen",
  payWithCard: "Mit Karte bezahlen",
  expiresIn: "Läuft ab in",
  returnToMerchant: "Zurück zum Händler",
  viewReceipt: "Beleg ansehen",
  otherNetworks: "In einem anderen Netzwerk bezahlen:",
  sendOnce: "Nur einmal senden, in nur einem Netzwerk.",
  notFoundTitle: "Zahlung nicht gefunden",
  notFoundText: "Prüfen Sie den erhaltenen Link oder wenden Sie sich an den Händler.",
  receiptTitle: "Beleg",
  receiptNotReady: "Noch kein Beleg: Diese Zahlung ist noch nicht bezahlt.",
  backToPayment: "Zurück zur Zahlung",
  merchant: "Händler",
  amount: "Betrag",
  token: "Token",
  method: "Zahlungsart",
  card: "Karte",
  transaction: "Transaktion",
  time: "Zeitpunkt",
  payer: "Bezahlt von",
  paymentId: "Zahlungs-ID",
  print: "Drucken",
  script: {
    copied: "Adresse kopiert",
    copyManually: "Markieren Sie die Adresse und kopieren Sie sie",
    connecting: "Verbindung zur Wallet wird hergestellt…",
    switching: "Netzwerk wird gewechselt…",
    addingNetwork: "{network} wird Ihrer Wallet hinzugefügt…",
    addNetwork: "Fügen Sie {network} Ihrer Wallet hinzu und versuchen Sie es erneut",
    confirmInWallet: "Bestätigen Sie die Zahlung in Ihrer Wallet…",
    sent: "Gesendet — warte auf Bestätigung. Transaktion: {hash}",
    rejected: "Sie haben die Anfrage in Ihrer Wallet abgelehnt.",
    walletError: "Ihre Wallet konnte die Zahlung nicht senden: {message}",
  },
};

export const MESSAGES: Record<Lang, Messages> = { en, fr, es, de };
