// html-to-text 10 ships no type declarations; this covers the part onceflow uses (README of the package).
declare module 'html-to-text' {
  export interface SelectorDefinition {
    selector: string;
    format?: string;
    options?: Record<string, unknown>;
  }
  export interface HtmlToTextOptions {
    wordwrap?: number | false | null;
    decodeEntities?: boolean;
    preserveNewlines?: boolean;
    limits?: {
      ellipsis?: string;
      maxBaseElements?: number;
      maxChildNodes?: number;
      maxDepth?: number;
      maxInputLength?: number;
    };
    selectors?: SelectorDefinition[];
  }
  export function compile(options?: HtmlToTextOptions): (html: string) => string;
  export function convert(html: string, options?: HtmlToTextOptions): string;
}
