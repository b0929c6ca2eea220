section .data
    ids dd 101, 102, 103, 104
section .text
global _start
_start:
    pxor xmm0, xmm0                 ; sum = 0.0
    mov ecx, 4
.sum:
    push ecx
    push dword [ids + ecx*4 - 4]
    call get_invoice_total
    movq xmm1, rax
    addsd xmm0, xmm1
    pop ecx
    loop .sum

    movsd xmm2, xmm0
    mov eax, 4
    cvtsi2sd xmm3, eax
    divsd xmm2, xmm3                ; average
    movq rax, xmm0
    push rax
    movq rax, xmm2
    push rax
    call report_totals
    hlt
